"""A region read the re-plan stopped waiting for (cut), through the real client on moto.

The re-plan (``next_round``) reads every region's groups in threads and waits for each only while its
invocation still has the time to plan and commit (:func:`spillway.observe.groups_read`); a region not
read by then is unread. Its thread was left running: Lambda freezes the execution environment when the
handler returns, and a process the function started that has not ended resumes when Lambda reuses the
environment for the next invocation (Lambda Developer Guide, execution environment lifecycle). There the
cut read went on calling AWS with the clients of the container, in the next invocation's time, and wrote
what it read into the adapter's caches. Now a cut read sends no call and uses no answer after the cut.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.exceptions import EndpointConnectionError, ReadTimeoutError

from spillway.adapters.aws import AwsAdapter, AwsClients, AwsSettings
from spillway.adapters.launch_cache import LaunchCache
from spillway.config import NodeReserve
from spillway.local.rig import create_group
from spillway.model.cluster import ClusterSnapshot, RegionUnread
from spillway.model.nodegroup import NodeGroup
from spillway.model.snapshot import Snapshot
from spillway.observe import groups_read

EAST, WEST = "us-east-1", "us-west-2"
NOW = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
RESERVE = NodeReserve().reserve()
BEFORE = Snapshot.build(ClusterSnapshot(cluster="ml", taken_at=NOW, nodes=(), pods=()), [], NOW)
# How long the first invocation waits for the regions: us-east-1's whole read must end in it, us-west-2's
# held call must not (a Stall holds it up to 10 s). With 1 s, us-east-1's read (on moto, in process) was
# not done in time late in a whole `make test` run on a fresh clone, and the test failed on its wait.
HUNG_WAIT = 5.0


class Stall:
    """Holds the first call of ``operation`` (any: the first call) sent on the clients it is registered on
    (an endpoint that hangs) until ``release`` is set, then fails that try with ``then`` if given; then
    records each try the held thread sends (a retry of the held call too)."""

    def __init__(self, operation: str = "", then: Exception | None = None) -> None:
        self.operation = operation
        self.then = then
        self.held = threading.Event()
        self.release = threading.Event()
        self.thread: int | None = None
        self.sent_after: list[str] = []

    def __call__(self, event_name: str = "", **_: Any) -> None:
        me = threading.get_ident()
        if self.thread is None and event_name.endswith(self.operation):
            self.thread = me
            self.held.set()
            self.release.wait(timeout=10)
            if self.then is not None:
                raise self.then
        elif me == self.thread:
            self.sent_after.append(event_name.split(".")[-1])

    def ended(self) -> bool:
        """Whether the held thread has ended (waiting for it up to 5 s)."""
        for thread in threading.enumerate():
            if thread.ident == self.thread:
                thread.join(timeout=5)
                return not thread.is_alive()
        return True


def stalled(
    operation: str = "", then: Exception | None = None, attempts: int = 1
) -> Iterator[tuple[AwsAdapter, Stall]]:
    """Two groups in each region (us-west-2's of c5.large, us-east-1's of m5.large), read by an adapter
    (``attempts`` tries a call) whose us-west-2 endpoints hang in the first call of ``operation``, that
    try failing with ``then`` when they answer."""
    for region, instance_type in ((EAST, "m5.large"), (WEST, "c5.large")):
        for name in ("gpu", "cpu"):
            create_group(
                f"{name}-{region}", region=region, cluster="ml", mixed=False, instance_type=instance_type
            )
    adapter = AwsAdapter(AwsClients((EAST, WEST), boto3.Session(), AwsSettings(max_attempts=attempts)), "ml")
    stall = Stall(operation, then)
    for client in (adapter._clients.autoscaling(WEST), adapter._clients.ec2(WEST)):
        client.meta.events.register("before-send", stall)
    yield adapter, stall
    stall.release.set()


@pytest.fixture
def aws(moto_aws: None) -> Iterator[tuple[AwsAdapter, Stall]]:
    yield from stalled()


@pytest.fixture
def types_stalled(moto_aws: None) -> Iterator[tuple[AwsAdapter, Stall]]:
    yield from stalled("DescribeInstanceTypes")


@pytest.fixture
def retried(moto_aws: None) -> Iterator[tuple[AwsAdapter, Stall]]:
    """Three tries a call; us-west-2's first call times out in transit when its endpoint answers."""
    yield from stalled(
        then=ReadTimeoutError(endpoint_url="https://autoscaling.us-west-2.amazonaws.com/"), attempts=3
    )


@pytest.fixture
def recheck_fails(moto_aws: None) -> Iterator[tuple[AwsAdapter, Stall]]:
    """us-west-2's first DescribeLaunchTemplateVersions fails unreached when its endpoint answers."""
    yield from stalled(
        "DescribeLaunchTemplateVersions",
        then=EndpointConnectionError(endpoint_url="https://ec2.us-west-2.amazonaws.com/"),
    )


def first_read(adapter: AwsAdapter, seconds: float) -> tuple[list[NodeGroup], tuple[RegionUnread, ...]]:
    """The re-plan's read of the regions, waiting ``seconds`` at most."""
    started = time.monotonic()
    return groups_read(
        adapter, RESERVE, NOW, BEFORE, 15, "ml", lambda: seconds - (time.monotonic() - started)
    )


def test_a_cut_region_read_sends_nothing_more_when_the_next_invocation_thaws_it(
    aws: tuple[AwsAdapter, Stall],
) -> None:
    adapter, stall = aws

    # the first invocation: us-west-2 hangs in its first call, past the time the re-plan waits
    live, unread = first_read(adapter, HUNG_WAIT)

    assert stall.held.is_set()
    assert [u.region for u in unread] == [WEST] and {g.region for g in live} == {EAST}
    # the next invocation, in the same process: the held call's endpoint answers at last
    stall.release.set()
    live, unread = groups_read(adapter, RESERVE, NOW, BEFORE, 15, "ml", lambda: 30.0)

    assert unread == () and {g.region for g in live} == {EAST, WEST}
    assert stall.ended()
    assert stall.sent_after == []  # the cut read went no further than its held call


def test_an_answer_that_comes_after_the_cut_reaches_nothing_the_container_keeps(
    types_stalled: tuple[AwsAdapter, Stall],
) -> None:
    """us-west-2's DescribeInstanceTypes hangs past the wait: when it answers at last, in the next
    invocation, the answer is dropped before the adapter keeps it (its instance types are known for the
    container's life, and every later read trusts them)."""
    adapter, stall = types_stalled

    _, unread = first_read(adapter, HUNG_WAIT)

    assert stall.held.is_set() and [u.region for u in unread] == [WEST]
    stall.release.set()
    assert stall.ended()
    assert "m5.large" in adapter._types.infos  # us-east-1's, read in time
    assert "c5.large" not in adapter._types.infos and "c5.large" not in adapter._types.unknown


def test_a_try_of_the_held_call_that_fails_after_the_cut_is_not_tried_again(
    retried: tuple[AwsAdapter, Stall],
) -> None:
    """botocore tries a call again within the call (AWS_MAX_ATTEMPTS) when a try fails in transit, each
    try sent from the reading thread (the ``before-send`` event, once per try, where ``before-call`` is
    once per call): the held call's read timing out after the cut sent its next try, in the next
    invocation's time, a call the cut read had no use for."""
    adapter, stall = retried

    _, unread = first_read(adapter, HUNG_WAIT)

    assert stall.held.is_set() and [u.region for u in unread] == [WEST]
    stall.release.set()
    assert stall.ended()
    assert stall.sent_after == []  # not the held call's second try either


def test_a_failure_of_the_held_call_after_the_cut_reaches_nothing_the_container_keeps(
    recheck_fails: tuple[AwsAdapter, Stall],
) -> None:
    """A call that ends with an error botocore raises (the endpoint unreachable, the read timed out: no
    answer parsed, so no ``after-call``, only ``after-call-error``) is an answer too: us-west-2's re-check
    of its kept launch template versions failing after the cut went on as a failed re-check does, and
    pushed each version's next re-check a whole period back (LaunchCache.postpone) in the container's
    cache."""
    adapter, stall = recheck_fails
    now = [1_000.0]
    cache = adapter._launch_cache = LaunchCache(clock=lambda: now[0])
    for client in (adapter._clients.autoscaling(WEST), adapter._clients.ec2(WEST)):
        client.meta.events.unregister("before-send", stall)
    first_read(adapter, 30.0)  # every region read, its template versions kept
    kept = [key for key in cache._facts if key[1] == WEST]
    assert kept
    now[0] += 2 * cache.recheck_seconds  # each due to be asked again whether it still exists
    adapter._clients.ec2(WEST).meta.events.register("before-send", stall)

    _, unread = first_read(adapter, HUNG_WAIT)  # us-west-2 hangs in its re-check

    assert stall.held.is_set() and [u.region for u in unread] == [WEST]
    stall.release.set()
    assert stall.ended()
    assert all(cache.due(key) for key in kept)  # none taken as re-checked
