"""What SetDesiredCapacity's tries tell a raise (act/claims.py raise_once) through the real adapter.

botocore tries a call up to ``max_attempts`` times before it answers: a try whose answer is lost (a read
timeout, a connection reset, a 5xx: EC2 Auto Scaling may have applied it) is tried again, and the call
ends with the last try's answer. SetDesiredCapacity sets an absolute value, so a try sent again is
harmless, but a refusal of the last try (``ResourceContention`` "You already have a pending update",
HTTP 500, or ``ScalingActivityInProgress``: EC2 Auto Scaling API Reference, SetDesiredCapacity, Errors;
``Throttling``) says nothing of an earlier try that was applied. And a call none of whose tries reached
AWS (the endpoint could not be reached or connected to: botocore's EndpointConnectionError,
ConnectTimeoutError) certainly applied nothing."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import pytest
from botocore.awsrequest import AWSResponse
from botocore.exceptions import EndpointConnectionError, FlexibleChecksumError, ReadTimeoutError
from fakes import FakeLedger

from spillway.act.claims import Owner, raise_once
from spillway.act.deadline import Deadline
from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings, _watching_tries
from spillway.errors import AwsThrottled, AwsUnavailable
from spillway.model.cluster import format_time

NOW = datetime.now(UTC)
URL = "https://autoscaling.us-east-1.amazonaws.com"
UP = "up-p1-1-us-east-1-gpu"


class _Body:
    """An HTTP body as botocore's parser reads it."""

    def __init__(self, data: bytes) -> None:
        self.content = data

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.content


def refusal(code: str, status: int) -> AWSResponse:
    """Auto Scaling's XML error answer (the Query protocol), as the service sends it."""
    body = (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{code} (injected)</Message>"
        "</Error><RequestId>r-1</RequestId></ErrorResponse>"
    ).encode()
    return AWSResponse(URL, status, {}, _Body(body))  # type: ignore[arg-type]


def tries(client: Any, operation: str, answer: Callable[[int], AWSResponse | None]) -> list[int]:
    """Each try of ``operation`` on ``client`` is answered by ``answer(n)`` (n from 1): a response, which
    moto then never sees (nothing applied), or None to let moto answer; ``answer`` may raise what botocore
    raises for a try (a timeout), before moto sees it."""
    seen: list[int] = []

    def send(request: Any, **_: Any) -> AWSResponse | None:
        seen.append(len(seen) + 1)
        response = answer(len(seen))
        if response is not None:
            request.url = "https://example.invalid/"  # moto answers only its own endpoints
        return response

    client.meta.events.register_first(f"before-send.auto-scaling.{operation}", send)
    return seen


@pytest.fixture
def clients(moto_aws: None) -> AwsClients:
    return AwsClients(
        ("us-east-1",), boto3.Session(), AwsSettings(max_attempts=3, connect_timeout=1, read_timeout=2)
    )


@pytest.fixture
def adapter(clients: AwsClients, make_asg: Callable[..., Any]) -> AwsAdapter:
    make_asg("us-east-1", "gpu", instance_type="g5.xlarge", desired=0, max_size=8)
    return AwsAdapter(clients, "prod")


def as_the_state_machine_runs_it(adapter: AwsAdapter, owner: Owner, count: int) -> None:
    """SetDesired as scale_up.asl.json runs it: AwsThrottled and AwsUnavailable are retried, up to 6 tries."""
    for _ in range(6):
        try:
            raise_once(adapter, owner, count, NOW)
            return
        except (AwsThrottled, AwsUnavailable):
            continue


def test_a_raise_whose_first_try_applied_unanswered_and_whose_last_was_refused_is_raised_once(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """The first try reaches AWS, which applies it (desired 0 -> 2), and its answer is lost (a read
    timeout); botocore tries again, and Auto Scaling refuses the tries after it with ResourceContention
    (the first try's update still pending). The call ended in AwsThrottled, which raise_once took for "not
    raised" (a refusal): it gave its marker back, and the state machine's retry raised 2 more on the live
    value, 2: desired 4, two GPU instances nobody asked for."""
    other = boto3.client("autoscaling", region_name="us-east-1")

    def answer(n: int) -> AWSResponse | None:
        if n == 1:
            other.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=2)  # applied...
            raise ReadTimeoutError(endpoint_url=URL)  # ...its answer lost
        return refusal("ResourceContention", 500) if n <= 3 else None  # the first call's other tries

    tries(clients.autoscaling("us-east-1"), "SetDesiredCapacity", answer)

    as_the_state_machine_runs_it(adapter, Owner(FakeLedger(), "prod", "us-east-1", "gpu", UP), 2)

    assert adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 2


def test_a_refusal_after_a_try_whose_answer_was_lost_is_aws_unavailable(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """The adapter's own word: a call whose last try was refused after an earlier try's answer was lost may
    have applied (AwsUnavailable, as a lost answer), whatever the refusal; the same refusals alone are
    AwsThrottled, retried as before."""
    answers = iter([None, "lost", "refused", "refused"])

    def answer(n: int) -> AWSResponse | None:
        what = next(answers)
        if what == "lost":
            raise ReadTimeoutError(endpoint_url=URL)
        return refusal("ScalingActivityInProgress", 400) if what == "refused" else None

    tries(clients.autoscaling("us-east-1"), "SetDesiredCapacity", answer)
    adapter.set_desired_capacity("us-east-1", "gpu", 1)  # the first call: answered at once

    with pytest.raises(AwsUnavailable, match=r"ScalingActivityInProgress.*may have applied"):
        adapter.set_desired_capacity("us-east-1", "gpu", 2)


def test_a_raise_none_of_whose_tries_reached_aws_is_raised_by_the_retry_beside_another_raise(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """The Auto Scaling endpoint cannot be reached for every try of the call (EndpointConnectionError: no
    try was sent), a minute after a gang raised the same group. raise_once read the failure as a lost
    answer, found the gang's marker in its window, could not tell and kept its own as unsettled: the
    state machine's retry found it and raised nothing, and the scale-up waited out its launch deadline
    and ended "unsettled", the pods waiting on for a raise AWS never heard of."""
    ledger = FakeLedger()
    ledger.claimed[("prod", "raise#gang-a1")] = {"before": 0, "after": 0, "count": 0, "group": "us-east-1/gpu",
                                                 "at": format_time(NOW - timedelta(minutes=1))}  # fmt: skip
    down = {"on": True}

    def answer(n: int) -> None:
        if down["on"]:
            raise EndpointConnectionError(endpoint_url=URL)
        return None

    tries(clients.autoscaling("us-east-1"), "SetDesiredCapacity", answer)
    owner = Owner(ledger, "prod", "us-east-1", "gpu", UP)
    with pytest.raises(AwsUnavailable):
        raise_once(adapter, owner, 2, NOW)
    down["on"] = False  # the endpoint is back

    as_the_state_machine_runs_it(adapter, owner, 2)

    assert adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 2
    assert not owner.unsettled()


def test_a_raise_whose_group_could_not_be_read_before_it_was_asked_is_raised_by_the_retry(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """The adapter reads the group before SetDesiredCapacity (to refuse a value outside its bounds before
    asking AWS). When that read timed out on every try, SetDesiredCapacity was never asked; raise_once took
    the AwsUnavailable for a lost answer of the raise and, beside another owner's marker, kept it
    unsettled: never raised."""
    ledger = FakeLedger()
    ledger.claimed[("prod", "raise#gang-a1")] = {"before": 0, "after": 0, "count": 0, "group": "us-east-1/gpu",
                                                 "at": format_time(NOW - timedelta(minutes=1))}  # fmt: skip
    calls = {"describe": 0}
    original = AwsAdapter.describe_group

    def describe(self: AwsAdapter, region: str, group: str) -> Any:
        calls["describe"] += 1
        if calls["describe"] == 2:  # raise_once's own read, then the adapter's before the call
            raise AwsUnavailable(f"DescribeAutoScalingGroups({region}, {group}): Read timeout")
        return original(self, region, group)

    adapter.describe_group = describe.__get__(adapter)  # type: ignore[method-assign]
    owner = Owner(ledger, "prod", "us-east-1", "gpu", UP)

    as_the_state_machine_runs_it(adapter, owner, 2)

    assert original(adapter, "us-east-1", "gpu").DesiredCapacity == 2
    assert not owner.unsettled()


def test_a_try_that_reached_aws_after_tries_that_did_not_is_never_unsent(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """The first try cannot connect (EndpointConnectionError, noted ``unsent``); the second reaches Auto
    Scaling, which applies it, and its answer then fails in botocore after it was received (a
    BotoCoreError raised while the answer is read, past the point botocore reports the try:
    endpoint.py ``_do_get_response`` verifies a response checksum, FlexibleChecksumError, after its
    ``try``, so no ``needs-retry`` is emitted for that try). Every try *noted* was unsent, and the call
    was said ``unsent``: raise_once gave its marker back, and the state machine's retry raised again on
    the live value, 2: desired 4."""
    fail_read = {"on": True}

    def answer(n: int) -> None:
        if n == 1:
            raise EndpointConnectionError(endpoint_url=URL)
        return None  # moto answers, and applies it

    def read(**_: Any) -> None:
        if fail_read["on"]:
            fail_read["on"] = False
            raise FlexibleChecksumError(error_msg="Expected checksum did not match (injected)")

    client = clients.autoscaling("us-east-1")
    tries(client, "SetDesiredCapacity", answer)
    client.meta.events.register("before-parse.auto-scaling.SetDesiredCapacity", read)
    owner = Owner(FakeLedger(), "prod", "us-east-1", "gpu", UP)

    raised = raise_once(adapter, owner, 2, NOW)  # lost, not unsent: read back, and it landed

    assert raised["status"] == "raised" and not owner.unsettled()
    assert adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 2


def test_tries_are_watched_for_each_operation_watched_on_one_client(clients: AwsClients) -> None:
    """The handler is registered once per client and operation: botocore ignores a second registration
    under a unique_id it has seen (hooks.py ``_register_section``), whatever its event, so a second
    operation watched on the same client would note no try."""
    client = clients.autoscaling("us-east-1")
    with _watching_tries(client, "SetDesiredCapacity"):
        pass

    def unreachable(n: int) -> None:
        raise EndpointConnectionError(endpoint_url=URL)

    tries(client, "UpdateAutoScalingGroup", unreachable)
    with _watching_tries(client, "UpdateAutoScalingGroup") as watched, pytest.raises(EndpointConnectionError):
        client.update_auto_scaling_group(AutoScalingGroupName="gpu", MaxSize=9)

    assert watched.outcomes == ["unsent"] * 3


def test_a_watch_within_a_watch_leaves_the_outer_one_watching(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """Leaving a watch restores the one it was opened within, rather than none: the outer call's tries
    after it are still noted."""
    client = clients.autoscaling("us-east-1")
    with _watching_tries(client, "SetDesiredCapacity") as outer:
        with _watching_tries(client, "UpdateAutoScalingGroup"):
            pass
        client.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=1)

    assert outer.outcomes == ["answered"]


def test_the_adapter_asks_before_each_call_it_makes_and_makes_none_it_is_refused(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """``before_call`` is called with the read of the group, then SetDesiredCapacity, each before it is
    made; what it raises is raised, and that call is not made: no try reaches Auto Scaling."""
    sent = tries(clients.autoscaling("us-east-1"), "SetDesiredCapacity", lambda n: None)
    seen: list[str] = []
    adapter.set_desired_capacity("us-east-1", "gpu", 1, before_call=seen.append)
    assert seen == ["DescribeAutoScalingGroups(us-east-1, gpu)", "SetDesiredCapacity(us-east-1, gpu, 1)"]
    assert sent == [1]

    def no_time(what: str) -> None:
        if what.startswith("SetDesiredCapacity"):
            raise AwsUnavailable(f"{what} not started", unsent=True)

    with pytest.raises(AwsUnavailable):
        adapter.set_desired_capacity("us-east-1", "gpu", 2, before_call=no_time)
    assert sent == [1] and adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 1


def test_a_raise_with_no_time_left_for_set_desired_capacity_sends_nothing_and_gives_its_marker_back(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """The step's deadline (spillway.act.deadline) leaves time for the marker and the read of the group,
    not then for SetDesiredCapacity and the marker's release: nothing is sent, the marker goes, and the
    retry raises once."""
    sent = tries(clients.autoscaling("us-east-1"), "SetDesiredCapacity", lambda n: None)
    left = [120.0, 120.0, 120.0, 60.0]  # at each check: the read, the marker, the adapter's read, the set
    owner = Owner(FakeLedger(), "prod", "us-east-1", "gpu", UP)

    with pytest.raises(AwsUnavailable) as refused:
        raise_once(
            adapter, owner, 2, NOW, deadline=Deadline(lambda: left.pop(0) if len(left) > 1 else left[0], 49)
        )

    assert refused.value.unsent and sent == [] and owner.raised() == 0
    raise_once(adapter, owner, 2, NOW, deadline=Deadline(lambda: 120.0, 49))
    assert sent == [1] and adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 2


# --- an answer that came but cannot be read ---------------------------------------------------------


def unreadable(status: int = 200) -> AWSResponse:
    """An answer botocore's Query parser cannot read (parsers.py ``_parse_xml_string_to_dom`` raises
    ResponseParserError for XML that does not parse): a body cut short."""
    return AWSResponse(URL, status, {}, _Body(b"<SetDesiredCapacityResponse><ResponseMeta"))  # type: ignore[arg-type]


def test_a_raise_that_applied_and_whose_answer_cannot_be_parsed_is_lost_and_raised_once(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """Auto Scaling applies the raise (0 -> 2) and its answer cannot be parsed. botocore raises
    ResponseParserError (parsers.py: an ``Exception``, not a BotoCoreError) from outside its retry loop
    (endpoint.py parses after ``_do_get_response``'s ``try``), so no other try is made. The adapter caught
    ClientError and BotoCoreError alone: the error left raise_once unmapped, its marker neither settled nor
    given back, and the step failed with an error name no state machine retries."""
    other = boto3.client("autoscaling", region_name="us-east-1")

    def answer(n: int) -> AWSResponse | None:
        if n == 1:
            other.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=2)  # applied...
            return unreadable()  # ...its answer unreadable
        return None

    tries(clients.autoscaling("us-east-1"), "SetDesiredCapacity", answer)
    owner = Owner(FakeLedger(), "prod", "us-east-1", "gpu", UP)

    as_the_state_machine_runs_it(adapter, owner, 2)

    assert adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 2
    assert owner.raised() == 2 and not owner.unsettled()


def test_a_raise_whose_answer_fails_its_checksum_is_lost_not_refused(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """A response checksum that does not match (FlexibleChecksumError, raised after the answer came): the
    raise may have applied, so it is AwsUnavailable (lost), not an AwsError, which raise_once reads as
    a refusal, gives its marker back for, and the retry raises again on the live value."""
    client = clients.autoscaling("us-east-1")

    def read(**_: Any) -> None:
        raise FlexibleChecksumError(error_msg="Expected checksum did not match (injected)")

    client.meta.events.register("before-parse.auto-scaling.SetDesiredCapacity", read)

    with pytest.raises(AwsUnavailable) as lost:
        adapter.set_desired_capacity("us-east-1", "gpu", 2)

    assert not lost.value.unsent
    assert adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 2


def test_a_read_whose_answer_cannot_be_parsed_is_aws_unavailable(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """A read whose answer cannot be parsed is retried (botocore: "Further retries may succeed"), as
    AwsUnavailable, rather than escaping as ResponseParserError."""
    tries(clients.autoscaling("us-east-1"), "DescribeAutoScalingGroups", lambda n: unreadable())

    with pytest.raises(AwsUnavailable, match="could not be read"):
        adapter.describe_group("us-east-1", "gpu")


def test_a_termination_that_applied_and_whose_answer_cannot_be_read_is_lost(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """TerminateInstanceInAutoScalingGroup answered without the Activity it returns: the instance is
    terminating. An AwsError (read as a refusal) failed the drain and its compensation uncordoned the node
    of an instance on its way out; AwsUnavailable is retried, and the retry finds it terminating."""
    other = boto3.client("autoscaling", region_name="us-east-1")
    other.set_desired_capacity(AutoScalingGroupName="gpu", DesiredCapacity=1)
    iid = other.describe_auto_scaling_groups(AutoScalingGroupNames=["gpu"])["AutoScalingGroups"][0][
        "Instances"
    ][0]
    empty = (
        b"<TerminateInstanceInAutoScalingGroupResponse><TerminateInstanceInAutoScalingGroupResult/>"
        b"<ResponseMetadata><RequestId>r-1</RequestId></ResponseMetadata></TerminateInstanceInAutoScalingGroupResponse>"
    )

    def answer(n: int) -> AWSResponse:
        other.terminate_instance_in_auto_scaling_group(
            InstanceId=iid["InstanceId"], ShouldDecrementDesiredCapacity=True
        )
        return AWSResponse(URL, 200, {}, _Body(empty))  # type: ignore[arg-type]

    tries(clients.autoscaling("us-east-1"), "TerminateInstanceInAutoScalingGroup", answer)

    with pytest.raises(AwsUnavailable):
        adapter.terminate_instance("us-east-1", iid["InstanceId"], decrement=True)


# --- a throttled try applied nothing ------------------------------------------------------------------


@pytest.mark.parametrize("code", ["Throttling", "RequestLimitExceeded", "SlowDown"])
def test_a_raise_throttled_as_a_5xx_and_then_refused_is_refused_and_raised_by_the_retry(
    adapter: AwsAdapter, clients: AwsClients, code: str
) -> None:
    """The first try is throttled with a 503 (a throttle is never applied; botocore retries it, a
    throttling code and a transient status), the next two are refused (ScalingActivityInProgress). The
    503 was noted as an answer lost, so the refusal read as "may have applied": beside a gang's raise of
    the window the raise was kept unsettled, the retry raised nothing, and the pods waited out the launch
    deadline for a raise AWS never applied."""
    ledger = FakeLedger()
    ledger.claimed[("prod", "raise#gang-a1")] = {"before": 0, "after": 0, "count": 0, "group": "us-east-1/gpu",
                                                 "at": format_time(NOW - timedelta(minutes=1))}  # fmt: skip

    def answer(n: int) -> AWSResponse | None:
        if n == 1:
            return refusal(code, 503)
        return refusal("ScalingActivityInProgress", 400) if n <= 3 else None

    tries(clients.autoscaling("us-east-1"), "SetDesiredCapacity", answer)
    owner = Owner(ledger, "prod", "us-east-1", "gpu", UP)

    with pytest.raises(AwsThrottled):
        raise_once(adapter, owner, 2, NOW)
    as_the_state_machine_runs_it(adapter, owner, 2)

    assert adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 2
    assert not owner.unsettled()


# --- AttachInstances and TerminateInstanceInAutoScalingGroup: the same lost tries --------------------


def refused_saying(code: str, status: int, message: str) -> AWSResponse:
    body = (
        f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{message}</Message>"
        "</Error><RequestId>r-1</RequestId></ErrorResponse>"
    ).encode()
    return AWSResponse(URL, status, {}, _Body(body))  # type: ignore[arg-type]


def test_a_termination_refused_at_min_size_after_a_lost_try_that_applied_is_lost(
    adapter: AwsAdapter, clients: AwsClients, make_asg: Callable[..., Any]
) -> None:
    """The first try terminates the instance with the decrement (2 -> 1, the group's MinSize) and its
    answer is lost; botocore tries again, and Auto Scaling refuses the decrement of a group at its
    MinSize. That read as AsgLimitExceeded: "nothing done", and a drain of a node that must not go
    without its decrement failed, its compensation uncordoning the node of an instance on its way out.
    After a lost try it is AwsUnavailable: retried, and the retry finds the instance terminating."""
    make_asg("us-east-1", "web", desired=2, min_size=1, max_size=4)
    other = boto3.client("autoscaling", region_name="us-east-1")
    iid = other.describe_auto_scaling_groups(AutoScalingGroupNames=["web"])["AutoScalingGroups"][0][
        "Instances"
    ][0]

    def answer(n: int) -> AWSResponse:
        if n == 1:
            other.terminate_instance_in_auto_scaling_group(
                InstanceId=iid["InstanceId"], ShouldDecrementDesiredCapacity=True
            )
            raise ReadTimeoutError(endpoint_url=URL)
        return refused_saying("ValidationError", 400, "Currently, desired capacity is at min size.")

    tries(clients.autoscaling("us-east-1"), "TerminateInstanceInAutoScalingGroup", answer)

    with pytest.raises(AwsUnavailable, match="may have applied"):
        adapter.terminate_instance("us-east-1", iid["InstanceId"], decrement=True)
    assert adapter.describe_group("us-east-1", "web").DesiredCapacity == 1  # decremented once


def test_an_attach_refused_above_max_size_after_a_lost_try_that_applied_is_lost(
    adapter: AwsAdapter, clients: AwsClients
) -> None:
    """The first try attaches the gang's instances (0 -> 2, the group's MaxSize here) and its answer is
    lost; the next tries are refused above MaxSize. That read as AsgLimitExceeded, and the gang gave
    back a launch that had joined its group; after a lost try it is AwsUnavailable, retried, and the
    retry finds them members."""
    ec2 = boto3.client("ec2", region_name="us-east-1")
    image = ec2.describe_images()["Images"][0]["ImageId"]
    ids = [i["InstanceId"] for i in ec2.run_instances(ImageId=image, MinCount=2, MaxCount=2)["Instances"]]
    other = boto3.client("autoscaling", region_name="us-east-1")
    other.update_auto_scaling_group(AutoScalingGroupName="gpu", MaxSize=2)

    def answer(n: int) -> AWSResponse:
        if n == 1:
            other.attach_instances(AutoScalingGroupName="gpu", InstanceIds=ids)
            raise ReadTimeoutError(endpoint_url=URL)
        return refused_saying(
            "ValidationError",
            400,
            "Desired capacity:4 must be between the specified min size:0 and max size:2",
        )

    tries(clients.autoscaling("us-east-1"), "AttachInstances", answer)

    with pytest.raises(AwsUnavailable, match="may have applied"):
        adapter.attach_instances("us-east-1", "gpu", ids)
    assert adapter.describe_group("us-east-1", "gpu").DesiredCapacity == 2
