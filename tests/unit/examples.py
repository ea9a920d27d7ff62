"""The example inputs under ``events/``: the `spillway plan` command line the README shows."""

from __future__ import annotations

from pathlib import Path

EVENTS = Path(__file__).resolve().parents[2] / "events"
EXAMPLE = [
    "plan",
    "--cluster", str(EVENTS / "example-cluster.json"),
    "--asgs", str(EVENTS / "example-asgs-us-east-1.json"),
    "--asgs", str(EVENTS / "example-asgs-us-west-2.json"),
    "--activities", str(EVENTS / "example-activities.json"),
    "--config", str(EVENTS / "example-config.yaml"),
    "--state", str(EVENTS / "example-state.json"),
    "--now", "2026-11-02T10:00:00Z",
]  # fmt: skip
