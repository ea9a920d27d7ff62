"""deploy/expand_foreach.py: Fn::ForEach expanded as AWS::LanguageExtensions does, so checkov sees it."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from spillway.local.cfn import load_template

ROOT = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("expand_foreach", ROOT / "deploy" / "expand_foreach.py")
assert _spec is not None and _spec.loader is not None
ef = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ef)

PARAMS = {"ClusterName": "ml-prod", "Regions": "us-east-1,eu-west-1"}


def template(resources: dict[str, Any], **extra: Any) -> dict[str, Any]:
    return {
        "Transform": ["AWS::LanguageExtensions", "AWS::Serverless-2016-10-31"],
        "Resources": resources,
        **extra,
    }


def test_keys_and_values_take_each_item_and_ampersand_strips_punctuation() -> None:
    doc = template(
        {
            "Fn::ForEach::Groups": [
                "Cluster",
                [{"Ref": "ClusterName"}],
                {
                    "Policy&{Cluster}": {
                        "Type": "AWS::IAM::ManagedPolicy",
                        "Properties": {
                            "Key": {
                                "Null": {
                                    "autoscaling:ResourceTag/k8s.io/cluster-autoscaler/${Cluster}": "false"
                                }
                            },
                            "Name": {"Ref": "Cluster"},
                            "Sub": {"Fn::Sub": "x-${Cluster}-${AWS::Region}"},
                        },
                    }
                },
            ],
            "Plain": {"Type": "AWS::SNS::Topic"},
        }
    )
    out = ef.expand(doc, PARAMS)
    assert set(out["Resources"]) == {"Policymlprod", "Plain"}
    props = out["Resources"]["Policymlprod"]["Properties"]
    assert props["Key"] == {"Null": {"autoscaling:ResourceTag/k8s.io/cluster-autoscaler/ml-prod": "false"}}
    assert props["Name"] == "ml-prod"
    assert props["Sub"] == {"Fn::Sub": "x-ml-prod-${AWS::Region}"}
    assert out["Transform"] == ["AWS::Serverless-2016-10-31"]
    assert "Fn::ForEach::Groups" in doc["Resources"]  # the input is left as it was


def test_a_ref_to_a_list_parameter_and_nested_loops_multiply() -> None:
    doc = template(
        {
            "Fn::ForEach::Outer": [
                "Region",
                {"Ref": "Regions"},
                {
                    "Fn::ForEach::Inner": [
                        "Kind",
                        ["A", "B"],
                        {
                            "${Kind}&{Region}": {
                                "Type": "AWS::SNS::Topic",
                                "Properties": {"N": "${Kind}/${Region}"},
                            }
                        },
                    ]
                },
            ]
        }
    )
    out = ef.expand(doc, PARAMS)["Resources"]
    assert out == {
        f"{k}{r.replace('-', '')}": {"Type": "AWS::SNS::Topic", "Properties": {"N": f"{k}/{r}"}}
        for k in ("A", "B")
        for r in ("us-east-1", "eu-west-1")
    }


def test_a_parameter_default_is_used_when_no_value_is_given() -> None:
    doc = template(
        {"Fn::ForEach::L": ["X", {"Ref": "Names"}, {"T${X}": {"Type": "AWS::SNS::Topic"}}]},
        Parameters={"Names": {"Type": "CommaDelimitedList", "Default": "a,b"}},
    )
    assert set(ef.expand(doc, {})["Resources"]) == {"Ta", "Tb"}


@pytest.mark.parametrize(
    ("block", "message"),
    [
        (["X", ["a"], "not a mapping"], "expected [Identifier"),
        (["X", {"Ref": "Missing"}, {"T${X}": {}}], "no value for parameter 'Missing'"),
        (["X", ["a", "a"], {"T${X}": {}}], "generated twice"),
        (["X", [{"Fn::GetAtt": ["R", "Arn"]}], {"T${X}": {}}], "is not a string or a Ref"),
    ],
)
def test_a_block_that_cannot_be_expanded_is_named(block: list[Any], message: str) -> None:
    with pytest.raises(ef.ExpandError, match=r"Fn::ForEach::Bad") as info:
        ef.expand(template({"Fn::ForEach::Bad": block}), PARAMS)
    assert message in str(info.value)


def test_the_real_template_expands_every_block_and_keeps_every_other_resource(tmp_path: Path) -> None:
    source = load_template(ROOT / "template.yaml")
    blocks = {k: v for k, v in source["Resources"].items() if k.startswith("Fn::ForEach::")}
    assert blocks, "template.yaml has no Fn::ForEach left: this check (and the expanded scan) is moot"
    target = tmp_path / "expanded.json"
    done = subprocess.run(
        [
            sys.executable,
            str(ROOT / "deploy" / "expand_foreach.py"),
            str(ROOT / "template.yaml"),
            str(target),
        ],
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(ROOT / "layers" / "spillway")},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    out = json.loads(target.read_text())["Resources"]
    assert not [k for k in out if k.startswith("Fn::")]
    plain = {k for k in source["Resources"] if k not in blocks}
    assert plain <= set(out)
    expected = sum(
        len(ef._collection(k, b[1], source, ef.EXAMPLE_PARAMETERS)) * len(b[2]) for k, b in blocks.items()
    )
    assert len(set(out) - plain) == expected
    log_groups = [r for r in out.values() if r["Type"] == "AWS::Logs::LogGroup"]
    assert len(log_groups) == 9 and all(r["Metadata"]["checkov"]["skip"] for r in log_groups)
