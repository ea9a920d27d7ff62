"""The local stack runs every function in one process; Powertools' metric set is one per process."""

from __future__ import annotations

import sys
import threading
import warnings

import pytest

from spillway.local.stack import _metrics_one_invocation_at_a_time
from spillway.observability import metrics


def test_handlers_flushing_metrics_from_several_threads_never_fail_an_invocation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """moto's executions call the functions from their own threads, all sharing ``metrics``: one flush
    serialized the set after another cleared it ("Must contain at least one metric") or while another
    added to it ("dictionary changed size during iteration"), and the demo's plan handler failed once in
    a long e2e run. Lambda runs one invocation per environment at a time, so the local stack makes the
    set's methods take turns. Without that, these 4,800 flushes fail a few times in every run."""
    errors: list[str] = []

    def invocation_after_invocation() -> None:
        for _ in range(600):
            try:
                metrics.add_metric(name="Probe", unit="Count", value=1)
                metrics.flush_metrics()
            except Exception as exc:  # what the handler's caller would get
                errors.append(repr(exc))

    switching = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads change hands as often as they can: the race shows every run
    try:
        with warnings.catch_warnings(), _metrics_one_invocation_at_a_time():
            warnings.simplefilter("ignore")  # "No application metrics to publish": another took them
            threads = [threading.Thread(target=invocation_after_invocation) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
    finally:
        sys.setswitchinterval(switching)
    capsys.readouterr()
    assert errors == []
    assert "add_metric" not in vars(metrics.provider)  # the class's methods again afterwards
