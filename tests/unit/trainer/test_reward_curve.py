"""The reward curve read from verl's file-logger lines: a record per step, train and validation apart."""

from __future__ import annotations

import json
from pathlib import Path

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
