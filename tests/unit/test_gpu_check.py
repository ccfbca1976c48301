"""The GPU check's pure parts: which wheels travel (scripts/gpu_wheelhouse.py), how results read (bench/gpu_check.py).

The whole command runs in CI (scripts/test.sh: ``--prepare`` for this Python, then ``--cpu`` on the device's
package set); these pin down the rules that decide what it carries and reports.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from bench import gpu_check
from scripts import gpu_wheelhouse as wh

ROOT = Path(__file__).resolve().parents[2]


def dist(name: str, pure: bool = True) -> wh.Dist:
    tail = "py3-none-any" if pure else "cp312-cp312-manylinux2014_x86_64"
    return wh.Dist(name, "1.0", f"{name.replace('-', '_')}-1.0-{tail}.whl", f"https://example.invalid/{name}")


def test_the_device_keeps_its_own_packages_and_everything_else_travels() -> None:
    needed = [dist("fastapi"), dist("numpy", pure=False), dist("aiohttp", pure=False), dist("idna"),
              dist("pydantic-core", pure=False), dist("multidict", pure=False)]
    carried, dropped = wh.select(needed)
    # multidict comes with the device's aiohttp, but at a version nobody here knows: it travels as a fallback.
    assert [d.name for d in carried] == ["fastapi", "idna", "pydantic-core", "multidict"]
    assert dropped == {"numpy": "the device's own package", "aiohttp": "the device's own package"}


def test_every_server_requirement_travels_but_the_excluded_ones() -> None:
    needs = {wh.requirement_name(r) for r in wh.needed_requirements(ROOT / "pyproject.toml")}
    assert {"fastapi", "uvicorn", "pydantic", "pydantic-settings", "soundfile", "soxr", "rapidfuzz"} <= needs
    assert not needs & set(wh.EXCLUDED)


def test_wheels_are_asked_for_the_target_python_not_this_one() -> None:
    flags = wh.target_flags("3.12")
    assert flags[:7] == ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp", "--abi",
                         "cp312"]
    platforms = flags[8::2]
    assert "manylinux2014_x86_64" in platforms and "manylinux_2_28_x86_64" in platforms
    assert all(p.endswith("x86_64") for p in platforms)


@pytest.mark.parametrize(("raw", "name"), [
    ("PyYAML", "pyyaml"), ("typing_extensions", "typing-extensions"), ("uvicorn[standard]>=0.29", "uvicorn"),
    ("zope.interface", "zope-interface"),
])
def test_names_compare_as_pip_compares_them(raw: str, name: str) -> None:
    assert wh.requirement_name(raw) == name


def test_clips_are_of_the_profile_s_lengths_and_the_same_each_run() -> None:
    speech = [np.full(16_000 * 2, k, dtype=np.float32) for k in range(3)]
    profile = gpu_check.PROFILES["gpu"]
    clips = gpu_check.make_clips(speech, 40, profile, seed=2)
    lengths = [len(c) / gpu_check.RATE for c, _ in clips]
    assert all(profile.min_s <= s <= profile.max_s for s in lengths)
    assert max(lengths) - min(lengths) > 5  # spread over the range, as a step's clips are
    again = gpu_check.make_clips(speech, 40, profile, seed=2)
    assert all(np.array_equal(a, b) and s == t for (a, s), (b, t) in zip(clips, again, strict=True))
    assert all(t for _, t in clips)


def test_refusals_and_engine_batches_are_read_from_the_server_metrics() -> None:
    text = (
        'audio_reward_requests_total{endpoint="/v1/score/batch",status="200"} 10.0\n'
        'audio_reward_requests_total{endpoint="/v1/score/batch",status="429"} 3.0\n'
        'audio_reward_requests_total{endpoint="/v1/score",status="503"} 1.0\n'
        'audio_reward_batch_size_count 4.0\n'
        'audio_reward_batch_size_sum 48.0\n'
    )
    totals = gpu_check.metric_totals(text)
    assert totals == {"refused": 4.0, "batches": 4.0, "batched_items": 48.0}
    zero = {"refused": 0.0, "batches": 0.0, "batched_items": 0.0}
    assert gpu_check.delta(zero, totals) == {"non_200": 4, "mean_engine_batch": 12.0}
    assert gpu_check.delta(totals, totals)["mean_engine_batch"] is None


def test_the_budget_skips_a_phase_that_would_not_fit() -> None:
    budget = gpu_check.Budget(10)
    budget.require(5, "a short phase")
    with pytest.raises(TimeoutError, match="the burst skipped"):
        budget.require(60, "the burst")


def whisper_result() -> dict[str, object]:
    run = {"requests": 8, "p50_s": 0.5, "mean_engine_batch": 8.0, "non_200": 0, "audio_s_per_s": 90.0}
    return {"arch": "whisper", "model": "random whisper-large-v3", "limit_audio_s_per_s": 100.0, "limit_batch": 64,
            "limit_by_batch": {"32": 80.0, "64": 100.0}, "tokens_per_clip": 72.0, "cap_tokens_per_clip": 72.0,
            "server_audio_s_per_s": {"1": 10.0, "32": 90.0, "128": 95.0},
            "server_vs_limit": {"1": 0.1, "32": 0.9, "128": 0.95}, "server_runs": {"1": run, "32": run, "128": run},
            "ratio_c128": 0.95, "burst_s": 50.0, "burst_limit_s": 46.0, "burst_vs_limit": 1.087, "burst_clips": 512,
            "burst_audio_s": 4600.0, "burst_failed": 0, "burst_non_200": 2}


def test_the_json_line_holds_the_promised_keys_and_the_table_each_row(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gpu_check, "versions", lambda: {"python": "3.12", "torch": "2.11", "transformers": "5.17"})
    monkeypatch.setattr(gpu_check, "device_name", lambda profile: "NVIDIA H200")
    summary = gpu_check.summarize(whisper_result(), {"skipped": "no Qwen3-ASR here"}, gpu_check.PROFILES["gpu"], 300)
    assert all(summary[k] is not None for k in gpu_check.REQUIRED)
    assert summary["server_audio_s_per_s"] == {"1": 10.0, "32": 90.0, "128": 95.0}
    assert summary["mode"] == "gpu" and summary["qwen3_asr"] == {"skipped": "no Qwen3-ASR here"}
    text = gpu_check.table(summary)
    assert "in-process (limit)" in text and "server, c=128" in text and "GRPO burst (plugin)" in text
    assert "no Qwen3-ASR here" in text


def test_a_failed_shape_is_reported_and_fails_the_check(monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(gpu_check, "versions", lambda: {"python": "3.12", "torch": "2.11", "transformers": "5.17"})
    monkeypatch.setattr(gpu_check, "quiet_transformers", lambda: None)
    monkeypatch.setattr(gpu_check, "device_name", lambda profile: "cpu")
    monkeypatch.setattr(gpu_check, "has_qwen3_asr", lambda: "not here")

    def fail(*args: object) -> dict[str, object]:
        raise RuntimeError("the server exited")

    monkeypatch.setattr(gpu_check, "measure_arch", fail)
    assert gpu_check.main(["--mode", "cpu", "--assets", str(tmp_path), "--out", str(tmp_path / "out"),
                           "--work", str(tmp_path / "work")]) == 1
    out = capsys.readouterr().out.splitlines()
    assert out[-1] == (tmp_path / "out" / "gpu_check.json").read_text().strip()
    assert any("missing figures: limit_audio_s_per_s" in line for line in out)
    assert "RuntimeError: the server exited" in (tmp_path / "out" / "gpu_check.txt").read_text()
