"""Write template.yaml with its ``Fn::ForEach`` blocks expanded, for scanners that skip them (checkov).

CloudFormation's ``AWS::LanguageExtensions`` transform expands ``Fn::ForEach`` at deploy time. checkov
reads the template as written and never scans what a ForEach produces (here: the Auto Scaling write
policies, the log groups, the alarms). This expands the ``Resources`` section the way the transform
does, with example parameter values, and writes JSON that checkov scans as well:

* ``Fn::ForEach::<Name>: [Identifier, Collection, {OutputKey: OutputValue, ...}]``; the collection is a
  list of strings (or of ``Ref``s to parameters), or a ``Ref`` to a ``CommaDelimitedList`` parameter;
* in each output key ``${Identifier}`` becomes the item and ``&{Identifier}`` the item without its
  non-alphanumeric characters; in each value ``{"Ref": Identifier}`` becomes the item, and
  ``${Identifier}``/``&{Identifier}`` inside any string are replaced the same way;
* nested ForEach blocks expand inside out; a resource id generated twice is an error.

Loads the template with :func:`spillway.local.cfn.load_template` (the loader the tests use). Runs with
any Python that has PyYAML (make validate uses the deploy tools' one):

    PYTHONPATH=layers/spillway python3 deploy/expand_foreach.py template.yaml build/template.expanded.json
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from spillway.local.cfn import load_template

PREFIX = "Fn::ForEach::"
# Values for the parameters a ForEach iterates over (any valid ones do for a scan).
EXAMPLE_PARAMETERS: dict[str, str] = {"ClusterName": "example", "Regions": "us-east-1,us-west-2"}


class ExpandError(ValueError):
    """The template's ForEach cannot be expanded (the message names the block)."""


def _collection(name: str, value: Any, template: Mapping[str, Any], params: Mapping[str, str]) -> list[str]:
    def param(ref: str) -> str:
        if ref in params:
            return params[ref]
        default = ((template.get("Parameters") or {}).get(ref) or {}).get("Default")
        if default is None:
            raise ExpandError(f"{name}: no value for parameter {ref!r}")
        return str(default)

    if isinstance(value, dict) and set(value) == {"Ref"}:
        return [item.strip() for item in param(str(value["Ref"])).split(",")]
    if not isinstance(value, list):
        raise ExpandError(f"{name}: the collection must be a list or a Ref")
    items = []
    for item in value:
        if isinstance(item, dict) and set(item) == {"Ref"}:
            items.append(param(str(item["Ref"])))
        elif isinstance(item, str | int | float):
            items.append(str(item))
        else:
            raise ExpandError(f"{name}: collection item {item!r} is not a string or a Ref")
    return items


def _substitute(text: str, identifier: str, item: str) -> str:
    text = text.replace("${" + identifier + "}", item)
    return text.replace("&{" + identifier + "}", re.sub(r"[^A-Za-z0-9]", "", item))


def _replace(value: Any, identifier: str, item: str) -> Any:
    if isinstance(value, str):
        return _substitute(value, identifier, item)
    if isinstance(value, list):
        return [_replace(v, identifier, item) for v in value]
    if isinstance(value, dict):
        if set(value) == {"Ref"} and value["Ref"] == identifier:
            return item
        return {
            _substitute(str(k), identifier, item): _replace(v, identifier, item) for k, v in value.items()
        }
    return value


def expand_section(
    section: Mapping[str, Any], template: Mapping[str, Any], params: Mapping[str, str]
) -> dict[str, Any]:
    """A mapping (e.g. ``Resources``) with every ``Fn::ForEach::*`` key replaced by what it generates."""
    out: dict[str, Any] = {}

    def put(key: str, value: Any, origin: str) -> None:
        if key in out:
            raise ExpandError(f"{origin}: {key!r} is generated twice (or also written by hand)")
        out[key] = value

    for key, value in section.items():
        if not key.startswith(PREFIX):
            put(key, value, key)
            continue
        if not (isinstance(value, list) and len(value) == 3 and isinstance(value[2], dict)):
            raise ExpandError(f"{key}: expected [Identifier, Collection, {{OutputKey: OutputValue}}]")
        identifier, collection, outputs = value
        inner = expand_section(outputs, template, params)  # nested loops first
        for item in _collection(key, collection, template, params):
            for out_key, out_value in inner.items():
                put(
                    _substitute(out_key, str(identifier), item),
                    _replace(out_value, str(identifier), item),
                    key,
                )
    return out


def expand(template: Mapping[str, Any], params: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The template with its ``Resources`` expanded (and ``AWS::LanguageExtensions`` done)."""
    values = dict(EXAMPLE_PARAMETERS if params is None else params)
    expanded = dict(template)
    expanded["Resources"] = expand_section(template["Resources"], template, values)
    transform = template.get("Transform")
    if isinstance(transform, list):
        expanded["Transform"] = [t for t in transform if t != "AWS::LanguageExtensions"]
    elif transform == "AWS::LanguageExtensions":
        expanded.pop("Transform")
    return expanded


def main(argv: list[str]) -> int:
    if len(argv) != 3:
        print("usage: expand_foreach.py TEMPLATE OUT.json", file=sys.stderr)
        return 2
    source, target = Path(argv[1]), Path(argv[2])
    template = load_template(source)
    try:
        expanded = expand(template)
    except ExpandError as exc:
        print(f"{source}: {exc}", file=sys.stderr)
        return 1
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(expanded, indent=1) + "\n")
    made = len(expanded["Resources"]) - sum(1 for k in template["Resources"] if not k.startswith(PREFIX))
    print(f"{target}: {len(expanded['Resources'])} resources, {made} of them from Fn::ForEach")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
