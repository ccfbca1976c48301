"""A Ray Serve replica SIGKILLed under a steady load loses no reward and doubles none.

``audio-reward serve --ray`` with two local replicas of the instant engine (each engine call
sleeps 150 ms, so both replicas hold requests when one dies); the project's
``AsyncScorerClient`` sends 20 requests a second with its retries; once a quarter of the
requests are answered, one replica's worker process gets SIGKILL.  The run
(:mod:`bench.ray_replica_kill`, which records every HTTP exchange under the client) goes on
until Ray's replacement replica has answered for a few seconds.
"""

from __future__ import annotations

import pytest

pytest.importorskip("ray")
pytest.importorskip("ray.serve")

from bench.ray_replica_kill import KillReport, run


@pytest.fixture(scope="module")
def kill_run() -> tuple[KillReport, str]:
    return run(rate=20.0, min_requests=200, delay_ms=150.0, after_s=4.0)


def test_every_request_is_scored_once_with_its_own_answer(kill_run: tuple[KillReport, str]) -> None:
    report, log = kill_run
    assert report.requests >= 200
    assert not report.problems(), (report, log[-3000:])


def test_the_kill_cost_retries_and_ray_put_a_new_replica_in_its_place(kill_run: tuple[KillReport, str]) -> None:
    report, log = kill_run
    assert 0 < report.killed_at_s < report.duration_s
    # The dead replica's requests in flight got a retryable answer (the proxy's 500) or a broken connection,
    # and the client sent each again: a few retries, never a lost reward.
    assert report.retried >= 1 and report.attempts_max <= 4, report
    assert set(report.failed_attempt_statuses) <= {"500", "502", "503", "504", "ReadError", "ConnectError"}, report
    assert report.replica_process_back_s is not None and report.replacement_serving_s is not None, log[-3000:]
    assert report.replacement_serving_s < 60


def test_the_load_kept_its_rate_through_the_kill(kill_run: tuple[KillReport, str]) -> None:
    report, _ = kill_run
    # One replica holds 4 clips per 150 ms call, above the 20 requests a second offered: the rate holds
    # before, while one replica serves alone, and after the replacement joins.
    for phase in (report.throughput_before, report.throughput_during, report.throughput_after):
        assert phase > 0.6 * report.rate, report
