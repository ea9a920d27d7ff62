"""cluster-autoscaler's per-group autoscaling options, read from an Auto Scaling group's tags.

A tag ``k8s.io/cluster-autoscaler/node-template/autoscaling-options/<option>`` overrides, for that group's
nodes, the setting cluster-autoscaler's flag of the same name gives the whole cluster. Values are
written as the flags take them: a float, a Go duration (``10m0s``, ``90s``, ``1h30m``) or a bool. Each
option overrides the planner setting that plays the flag's part:

==================================  =============================================================
option                              planner setting(s)
==================================  =============================================================
``scaledownutilizationthreshold``   ``consolidation_utilization_threshold``
``scaledowngpuutilizationthreshold``  ``consolidation_gpu_utilization_threshold`` (GPU nodes)
``scaledownunneededtime``           ``scale_down_idle_minutes`` and ``consolidation_after_minutes``
``scaledownunreadytime``            ``scale_down_unready_minutes``
``maxnodeprovisiontime``            ``max_node_provision_minutes``
``ignoredaemonsetsutilization``     ``ignore_daemonsets_utilization``
==================================  =============================================================

cluster-autoscaler's AWS provider reads the first four and ``ignoredaemonsetsutilization``;
``maxnodeprovisiontime`` is an option its other providers read, which Spillway honours on AWS groups
too. A value that cannot be read (or is out of range) is left out and named in the group's
``problems``; so is an option Spillway does not read. The planner applies a group's options to its configuration
(:meth:`spillway.planner.context.Context.config_for`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping

TAG_OPTIONS = "k8s.io/cluster-autoscaler/node-template/autoscaling-options/"

Options = tuple[tuple[str, float | bool], ...]  # (planner setting, value), sorted

# option -> (kind, planner settings it sets)
_OPTIONS: dict[str, tuple[str, tuple[str, ...]]] = {
    "scaledownutilizationthreshold": ("share", ("consolidation_utilization_threshold",)),
    "scaledowngpuutilizationthreshold": ("share", ("consolidation_gpu_utilization_threshold",)),
    "scaledownunneededtime": ("minutes", ("scale_down_idle_minutes", "consolidation_after_minutes")),
    "scaledownunreadytime": ("minutes", ("scale_down_unready_minutes",)),
    "maxnodeprovisiontime": ("positive-minutes", ("max_node_provision_minutes",)),
    "ignoredaemonsetsutilization": ("bool", ("ignore_daemonsets_utilization",)),
}
_UNIT_SECONDS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "μs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_DURATION = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|μs|ms|s|m|h)", re.ASCII)  # Go: ASCII digits
# Longest delay a *_minutes setting may hold: ten years is "never" for an autoscaler, and anything
# finite this size still fits the timedeltas the planner builds from it (inf and 1e300 do not). The
# configuration's settings and the tags that override them share this bound.
MAX_MINUTES = 10 * 366 * 24 * 60


def parse_duration_minutes(text: str) -> float:
    """A Go ``time.ParseDuration`` string (``10m0s``, ``1.5h``, ``300ms``; ``0`` alone) in minutes."""
    value = text.strip()
    if value in ("0", "+0", "-0"):
        return 0.0
    if value.startswith("-"):
        raise ValueError("a negative duration")
    body = value.removeprefix("+")
    pos, seconds = 0, 0.0
    while pos < len(body):
        match = _DURATION.match(body, pos)
        if match is None:
            raise ValueError("not a duration (a number with a unit: ns, us, ms, s, m, h; 10m0s)")
        seconds += float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        pos = match.end()
    if not body:
        raise ValueError("an empty duration")
    return seconds / 60


def _value(kind: str, text: str) -> float | bool:
    if kind == "bool":  # Go's strconv.ParseBool, spelling for spelling
        if text in ("1", "t", "T", "TRUE", "true", "True"):
            return True
        if text in ("0", "f", "F", "FALSE", "false", "False"):
            return False
        raise ValueError("not true or false")
    if kind == "share":
        try:
            share = float(text)
        except ValueError:
            raise ValueError("not a number") from None
        if not 0 <= share <= 1 or math.isnan(share):
            raise ValueError("not between 0 and 1")
        return share
    minutes = parse_duration_minutes(text)
    if minutes > MAX_MINUTES or (kind == "positive-minutes" and minutes <= 0):
        raise ValueError("out of range" if minutes > MAX_MINUTES else "not above 0")
    return minutes


def parse_options(tags: Mapping[str, str]) -> tuple[Options, list[str]]:
    """The group's options as planner settings, and a problem (naming the tag) for each one skipped."""
    settings: dict[str, float | bool] = {}
    problems: list[str] = []
    for key in sorted(k for k in tags if k.startswith(TAG_OPTIONS)):
        option = key.removeprefix(TAG_OPTIONS)
        known = _OPTIONS.get(option)
        if known is None:
            problems.append(f"Tags[{key}]: not an autoscaling option Spillway reads; ignored")
            continue
        kind, fields = known
        try:
            value = _value(kind, tags[key])
        except ValueError as exc:
            problems.append(f"Tags[{key}]: {tags[key][:64]!r} is {exc}; ignored")
            continue
        settings.update(dict.fromkeys(fields, value))
    return tuple(sorted(settings.items())), problems
