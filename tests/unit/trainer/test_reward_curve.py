"""The reward curve read from verl's file-logger lines: a record per step, train and validation apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audio_reward.trainer_plugin.reward_curve import main, read_curve, write_reward_curve


def write_metrics(path: Path) -> Path:
    lines = [
        {"step": 0, "data": {"val-core/toy/reward/mean@1": 0.5}},
        {"step": 1, "data": {"critic/score/mean": 0.6, "timing_s/step": 7.5, "training/rollout_probs_diff_max": 1e-6}},
        {"step": 2, "data": {"critic/score/mean": float("nan")}},
        {"step": 3, "data": {"critic/score/mean": 0.8, "val-core/toy/reward/mean@1": 0.9}},
    ]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines) + '{"step": 4, "da', encoding="utf-8")
    return path


def test_each_step_has_its_train_and_validation_reward(tmp_path: Path) -> None:
    curve = read_curve(write_metrics(tmp_path / "metrics.jsonl"))
    assert [(r["step"], r["reward_mean"], r["val_reward_mean"]) for r in curve] == [
        (0, None, 0.5), (1, 0.6, None), (2, None, None), (3, 0.8, 0.9)]  # a NaN is no reward; a torn line is skipped
    assert curve[1]["step_s"] == 7.5 and curve[1]["rollout_probs_diff_max"] == 1e-6


def test_the_command_writes_the_json_and_says_what_is_missing(tmp_path: Path) -> None:
    metrics = write_metrics(tmp_path / "metrics.jsonl")
    assert main([str(metrics), "--out", str(tmp_path / "curve")]) == 0
    assert json.loads((tmp_path / "curve" / "reward_curve.json").read_text()) == write_reward_curve(
        metrics, tmp_path / "again")


def test_windowed_means_over_20_steps_as_published_runs_report_them(tmp_path: Path) -> None:
    rewards = {step: 0.5 + step / 100 for step in range(1, 26)}
    rewards[3] = float("nan")  # a step whose reward is not a number is left out of its windows
    metrics = tmp_path / "metrics.jsonl"
    metrics.write_text("".join(json.dumps({"step": s, "data": {"critic/score/mean": r}}) + "\n"
                               for s, r in rewards.items()), encoding="utf-8")
    curve = read_curve(metrics)
    assert [r["reward_mean_window"] for r in curve[:19]] == [None] * 19  # the window does not fit the run yet
    first = [rewards[s] for s in range(1, 21) if s != 3]
    assert curve[19]["step"] == 20 and curve[19]["reward_mean_window"] == sum(first) / 19
    last = [rewards[s] for s in range(6, 26)]
    assert curve[-1]["reward_mean_window"] == sum(last) / 20
    # the keys the curve had before are all still there
    assert {"step", "reward_mean", "val_reward_mean", "step_s", "rollout_probs_diff_max"} <= set(curve[-1])


def test_the_window_is_a_flag_and_the_png_is_drawn(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    metrics = write_metrics(tmp_path / "metrics.jsonl")
    assert main([str(metrics), "--out", str(tmp_path / "curve"), "--window", "2"]) == 0
    curve = json.loads((tmp_path / "curve" / "reward_curve.json").read_text())
    # steps 0-3: 0 has only a validation reward, 2 a NaN; the 2-step window fits from step 1
    assert [r["reward_mean_window"] for r in curve] == [None, 0.6, 0.6, 0.8]
    assert (tmp_path / "curve" / "reward_curve.png").stat().st_size > 1000
