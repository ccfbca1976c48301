"""The load run of ``bench/load.py`` at CI size: every request answered exactly once,
server memory bounded by its queue limit. ``AUDIO_REWARD_RELIABILITY_FULL=1`` runs
the full 10,000 requests at concurrency 256."""

from __future__ import annotations

from .budget import LOAD_CONCURRENCY, LOAD_REQUESTS
from .conftest import bench


def test_every_request_answered_exactly_once_with_bounded_memory() -> None:
    with bench.scorer_server("instant", max_queue=512, max_batch_size=32, max_wait_ms=2) as handle:
        report = bench.run_load(handle, LOAD_REQUESTS, LOAD_CONCURRENCY)
        assert handle.proc.poll() is None
    print("\n".join(report.lines()))
    assert report.errors == 0, report.error_kinds
    assert report.wrong_answers == 0
    assert report.answered == report.unique_ids == report.server_items_ok == LOAD_REQUESTS
    assert report.answered_once
    assert report.memory_bounded, report.lines()[-1]
