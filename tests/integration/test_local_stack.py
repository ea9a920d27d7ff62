"""The local stack harness: template.yaml on moto with in-process handlers, errors named as on AWS."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import boto3
import pytest

from spillway.local.rig import create_group
from spillway.local.stack import LocalStack

FIXTURE = Path(__file__).parent / "local_stack_fixture" / "template.yaml"


def make_group(name: str) -> None:
    """An untagged group: this stack's state machine scales it by name."""
    create_group(name, instance_type="m5.large", max_size=5, cluster=None, enabled=False, mixed=False)


def test_functions_run_in_process_with_template_environment() -> None:
    with LocalStack(template=FIXTURE) as stack:
        result = stack.invoke("Fn", {"x": 1})
        assert result == {"seen": {"x": 1}, "table": stack.tables["Table"], "function": "spillway-Fn"}
        assert (
            boto3.client("dynamodb").describe_table(TableName=stack.tables["Table"])["Table"]["TableStatus"]
            == "ACTIVE"
        )


def test_lambda_errors_match_retry_by_exception_name_and_sdk_errors_by_aws_names(monkeypatch: Any) -> None:
    from moto.autoscaling.exceptions import AutoscalingClientError
    from moto.autoscaling.models import AutoScalingBackend

    original = AutoScalingBackend.set_desired_capacity
    failures = {"left": 2}

    def flaky(self: Any, group_name: str, desired_capacity: int) -> Any:
        if failures["left"]:
            failures["left"] -= 1
            raise AutoscalingClientError(
                "ScalingActivityInProgress", "Scaling activity is in progress and blocks this action"
            )
        return original(self, group_name, desired_capacity)

    monkeypatch.setattr(AutoScalingBackend, "set_desired_capacity", flaky)
    with LocalStack(template=FIXTURE) as stack:
        make_group("g")
        out = stack.run("Machine", {"group": "g", "explode": False}, timeout=30)
        assert out["status"] == "SUCCEEDED", out
        assert failures["left"] == 0
        desc = boto3.client("autoscaling").describe_auto_scaling_groups(AutoScalingGroupNames=["g"])
        assert desc["AutoScalingGroups"][0]["DesiredCapacity"] == 2

        failed = stack.run("Machine", {"group": "g", "explode": True}, timeout=30)
        assert failed["status"] == "FAILED"
        assert failed["error"] == "KubeUnavailable"
        # The first call and MaxAttempts (2) retries, as on AWS.
        assert len([c for c in stack.calls("Fn") if c.event.get("explode")]) == 3


def test_an_sdk_error_the_api_does_not_model_arrives_as_the_services_base_exception(monkeypatch: Any) -> None:
    """As on AWS: Auto Scaling's throttling is no error SetDesiredCapacity models, so an aws-sdk task
    fails with "AutoScaling.AutoScalingException", which a Retry on a modelled name does not match."""
    from moto.autoscaling.exceptions import AutoscalingClientError
    from moto.autoscaling.models import AutoScalingBackend

    def throttled(self: Any, group_name: str, desired_capacity: int) -> Any:
        raise AutoscalingClientError("Throttling", "Rate exceeded")

    monkeypatch.setattr(AutoScalingBackend, "set_desired_capacity", throttled)
    with LocalStack(template=FIXTURE) as stack:
        make_group("g")
        failed = stack.run("Machine", {"group": "g", "explode": False}, timeout=30)
        assert failed["status"] == "FAILED"
        assert failed["error"] == "AutoScaling.AutoScalingException", failed


def test_unresolvable_substitution_is_reported(tmp_path: Path) -> None:
    text = FIXTURE.read_text().replace("FnArn: !GetAtt Fn.Arn", "FnArn: !GetAtt Nothing.Arn")
    (tmp_path / "fn").symlink_to(FIXTURE.parent / "fn")
    (tmp_path / "machine.asl.json").write_text((FIXTURE.parent / "machine.asl.json").read_text())
    (tmp_path / "template.yaml").write_text(text)
    with (
        pytest.raises(ValueError, match=r"DefinitionSubstitutions\.FnArn"),
        LocalStack(template=tmp_path / "template.yaml"),
    ):
        pass


def test_a_definition_is_parsed_to_validate_it_once_and_a_bad_one_is_refused_every_time(
    monkeypatch: Any,
) -> None:
    """moto parses a definition on every CreateStateMachine only to validate it (ANTLR, ~0.3 s each):
    a text that parsed once is not parsed again for that; an invalid one is refused each time, and an
    execution still parses its machine's definition."""
    from botocore.exceptions import ClientError
    from moto.stepfunctions.parser.asl.parse.asl_parser import AmazonStateLanguageParser

    original = AmazonStateLanguageParser.parse
    parsed: list[str] = []

    def counting(definition: str) -> Any:
        parsed.append(definition)
        return original(definition)

    monkeypatch.setattr(AmazonStateLanguageParser, "parse", staticmethod(counting))
    with LocalStack(template=FIXTURE):
        pass
    parsed.clear()
    with LocalStack(template=FIXTURE) as stack:
        assert parsed == [], "the same definition was parsed again to validate it"
        sfn = stack.client("stepfunctions")
        role = f"arn:aws:iam::123456789012:role/{stack.prefix}-local"
        for attempt in ("first", "second"):
            with pytest.raises(ClientError, match="in definition"):  # moto's InvalidDefinition
                sfn.create_state_machine(
                    name=f"bad-{attempt}", definition='{"StartAt": "Nowhere"}', roleArn=role
                )
        assert len(parsed) == 2
        make_group("g")
        out = stack.run("Machine", {"group": "g", "explode": False}, timeout=30)
        assert out["status"] == "SUCCEEDED", out
        assert len(parsed) == 3, "an execution parses its definition"
