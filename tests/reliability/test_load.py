"""The load run of ``bench/load.py`` at CI size: every request answered exactly once,
server memory bounded by its queue limit. ``AUDIO_REWARD_TEST_RELIABILITY_FULL=1`` runs
the full 10,000 requests at concurrency 256."""

from __future__ import annotations

import json
import subprocess
import tarfile
from pathlib import Path

import pytest

from bench import load
from tests.testkit.server import running_server

from .budget import LOAD_CONCURRENCY, LOAD_REQUESTS


def test_every_request_answered_exactly_once_with_bounded_memory() -> None:
    with running_server(instant=True, max_queue=512, max_batch_size=32, max_wait_ms=2) as handle:
        report = load.run_load(handle, LOAD_REQUESTS, LOAD_CONCURRENCY)
        assert handle.proc.poll() is None
    print("\n".join(report.lines()))
    assert report.errors == 0, report.error_kinds
    assert report.wrong_answers == 0
    assert report.answered == report.unique_ids == report.server_items_ok == LOAD_REQUESTS
    assert report.answered_once
    assert report.memory_bounded, report.lines()[-1]


def test_baseline_comparison_runs_both_checkouts_and_prints_the_ratio(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # The documented form: a git archive of another revision beside this checkout (here: this one's HEAD).
    archive = tmp_path / "baseline.tar"
    subprocess.run(["git", "archive", "-o", str(archive), "HEAD"], cwd=load.REPO, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(tmp_path / "baseline", filter="data")
    out_json = tmp_path / "compare.json"
    code = load.main(["--requests", "200", "--concurrency", "16", "--rounds", "1",
                       "--baseline", str(tmp_path / "baseline"), "--json", str(out_json)])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "round 1 baseline" in printed and "round 1 this" in printed and "ratio this/baseline" in printed
    figures = json.loads(out_json.read_text())
    assert figures["ratio"] > 0 and set(figures["median_rps"]) == {"baseline", "this"}
