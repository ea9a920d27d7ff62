"""template.yaml, statemachines/ and functions/ agree with each other: a contract checked on every run."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from typing import Any

import pytest

from spillway.local.cfn import load_template

ROOT = Path(__file__).resolve().parents[2]
TEMPLATE = load_template(ROOT / "template.yaml")
# Fn::ForEach blocks (lists) expand to IAM policies, alarms and log groups; the contract is about the rest.
RESOURCES: dict[str, Any] = {k: v for k, v in TEMPLATE["Resources"].items() if isinstance(v, dict)}


def of_type(kind: str) -> dict[str, dict[str, Any]]:
    return {k: v.get("Properties") or {} for k, v in RESOURCES.items() if v.get("Type") == kind}


FUNCTIONS = of_type("AWS::Serverless::Function")
STATE_MACHINES = of_type("AWS::Serverless::StateMachine")


def references(value: Any) -> set[str]:
    """Logical ids a template value points at (Ref, GetAtt, ${X} / ${X.Attr} in Sub)."""
    found: set[str] = set()
    if isinstance(value, dict):
        for key, inner in value.items():
            if key == "Ref" and isinstance(inner, str):
                found.add(inner)
            elif key == "Fn::GetAtt":
                found.add(inner[0] if isinstance(inner, list) else str(inner).split(".")[0])
            elif key == "Fn::Sub":
                text = inner if isinstance(inner, str) else inner[0]
                found |= {m.split(".")[0] for m in re.findall(r"\$\{([^}!]+)\}", text)}
            else:
                found |= references(inner)
    elif isinstance(value, list):
        for inner in value:
            found |= references(inner)
    return found


def test_template_has_functions_and_state_machines_to_check() -> None:
    assert FUNCTIONS, "template.yaml defines no functions"


@pytest.mark.parametrize("logical", sorted(STATE_MACHINES))
def test_every_placeholder_in_an_asl_file_is_substituted(logical: str) -> None:
    props = STATE_MACHINES[logical]
    text = (ROOT / props["DefinitionUri"]).read_text()
    json.loads(re.sub(r"\$\{[A-Za-z0-9_]+\}", "0", text))  # valid JSON once substituted
    used = set(re.findall(r"\$\{([A-Za-z0-9_]+)\}", text))
    supplied = set(props.get("DefinitionSubstitutions") or {})
    assert used - supplied == set(), f"{logical}: no substitution for {sorted(used - supplied)}"
    assert supplied - used == set(), f"{logical}: substitutions never used: {sorted(supplied - used)}"


@pytest.mark.parametrize("logical", sorted(STATE_MACHINES))
def test_every_resource_a_state_machine_names_exists(logical: str) -> None:
    props = STATE_MACHINES[logical]
    parameters = set(TEMPLATE.get("Parameters") or {})
    assert all(isinstance(v, (dict, list)) for v in TEMPLATE["Resources"].values())
    pseudo = {"AWS::Region", "AWS::AccountId", "AWS::Partition", "AWS::StackName", "AWS::URLSuffix"}
    for key, value in (props.get("DefinitionSubstitutions") or {}).items():
        for ref in references(value):
            assert ref in RESOURCES or ref in parameters or ref in pseudo, f"{logical}.{key} -> unknown {ref}"
    # A Lambda the definition calls by substitution must be a function of this template, and the
    # state machine's policies must let it invoke that function.
    text = (ROOT / props["DefinitionUri"]).read_text()
    policies = json.dumps(props.get("Policies") or [])
    for key, value in (props.get("DefinitionSubstitutions") or {}).items():
        targets = references(value) & set(FUNCTIONS)
        if targets and "${" + key + "}" in text:
            for fn in targets:
                assert fn in policies, f"{logical} calls {fn} but its Policies do not allow invoking it"


@pytest.mark.parametrize("logical", sorted(FUNCTIONS))
def test_every_handler_path_imports(logical: str) -> None:
    props = FUNCTIONS[logical]
    code = ROOT / props["CodeUri"]
    module_name, _, attr = props.get("Handler", "app.handler").rpartition(".")
    path = code / f"{module_name.replace('.', '/')}.py"
    assert path.is_file(), f"{logical}: {path} missing"
    spec = importlib.util.spec_from_file_location(f"contract_{logical}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses in the module look themselves up there
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(spec.name, None)
    assert callable(getattr(module, attr)), f"{logical}: {props['Handler']} is not callable"


def test_asl_lambda_tasks_only_call_substituted_functions() -> None:
    """No hard-coded function ARNs: every Lambda Resource/FunctionName comes from a substitution."""
    for logical, props in STATE_MACHINES.items():
        text = (ROOT / props["DefinitionUri"]).read_text()
        assert "arn:aws:lambda:" not in text, f"{logical}: hard-coded Lambda ARN"
