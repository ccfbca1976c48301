"""The reward curve of a verl run: one JSON record per step and a PNG, from verl's file logger.

The published GRPO runs are judged by this curve.  verl writes every step's
metrics as a JSON line when ``trainer.logger`` includes ``file``
(``verl/utils/tracking.py``, ``FileLogger``; the path is
``VERL_FILE_LOGGER_PATH``).  :func:`write_reward_curve` reads that file and
writes ``reward_curve.json`` (a list of ``{"step", "reward_mean", ...}``, the
training reward of each step, its windowed mean ``reward_mean_window`` and,
at the steps that validated, the validation reward) and ``reward_curve.png``::

    python -m audio_reward.trainer_plugin.reward_curve METRICS.jsonl --out DIR [--window 20]

One step's training reward is the mean over a handful of prompts (4 × 8
samples in the TTS recipe) and swings from step to step; published runs
report it as means over 20 steps (:data:`WINDOW`), which
``reward_mean_window`` is: at step ``s``, the mean of the training rewards of
steps ``s - window + 1`` to ``s`` (a step that logged no reward is left out),
from the first step at which the window lies inside the run.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
from collections.abc import Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

logger = logging.getLogger(__name__)

TRAIN_REWARD = "critic/score/mean"
"""verl's mean sequence reward of the step's training batch (before any KL penalty)."""
CARRIED = MappingProxyType({
    "score_failed": "score_failed",
    "response_length": "response_length/mean",
    "step_s": "timing_s/step",
    "rollout_probs_diff_max": "training/rollout_probs_diff_max",
    "log_ppl_abs_diff": "rollout_corr/log_ppl_abs_diff",
    "is_truncated_fraction": "rollout_corr/rollout_is_ratio_fraction_high",
})
"""Other per-step figures kept beside the reward, by their verl metric name (a suffix match)."""
WINDOW = 20
"""Steps in a windowed mean, as published TTS GRPO runs report the reward."""


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _metric(data: dict[str, Any], suffix: str) -> float | None:
    return next((_finite(v) for k, v in data.items() if k == suffix or k.endswith("/" + suffix)), None)


def _val_reward(data: dict[str, Any]) -> float | None:
    found = (_finite(v) for k, v in data.items() if k.startswith("val-core/") and "/reward/mean" in k)
    values = [v for v in found if v is not None]
    return sum(values) / len(values) if values else None


def read_json_lines(path: str | Path) -> list[Any]:
    """The JSON value of each line of a JSON-lines file, oldest first; a line cut short by a crash is skipped."""
    values = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        with contextlib.suppress(json.JSONDecodeError):
            values.append(json.loads(line))
    return values


def add_window_means(curve: list[dict[str, Any]], window: int = WINDOW) -> list[dict[str, Any]]:
    """Set each record's ``reward_mean_window``: the mean ``reward_mean`` of the steps in ``(step - window,
    step]``, None until the window lies inside the run (or when no step in it logged a reward).  ``window`` is
    at least 1: the command line refuses less, and every other caller passes :data:`WINDOW`."""
    first = curve[0]["step"] if curve else 0
    rewards = [(r["step"], r["reward_mean"]) for r in curve if r["reward_mean"] is not None]
    for record in curve:
        step = record["step"]
        inside = [reward for s, reward in rewards if step - window < s <= step]
        full = step - first + 1 >= window
        record["reward_mean_window"] = sum(inside) / len(inside) if full and inside else None
    return curve


def read_curve(metrics_path: str | Path, window: int = WINDOW) -> list[dict[str, Any]]:
    """One record per logged step, in step order: ``step``, ``reward_mean``, ``reward_mean_window`` (over
    ``window`` steps, :func:`add_window_means`), ``val_reward_mean`` and the :data:`CARRIED` figures (None
    where the step did not log one)."""
    by_step: dict[int, dict[str, Any]] = {}
    for entry in read_json_lines(metrics_path):
        data, step = entry.get("data") or {}, entry.get("step")
        if not isinstance(step, int):
            continue
        updates = {"reward_mean": _finite(data.get(TRAIN_REWARD)), "val_reward_mean": _val_reward(data),
                   **{name: _metric(data, key) for name, key in CARRIED.items()}}
        record = by_step.setdefault(step, {"step": step, **dict.fromkeys(updates)})
        record.update({k: v for k, v in updates.items() if v is not None})
    return add_window_means([by_step[s] for s in sorted(by_step)], window)


def plot_curve(curve: Sequence[dict[str, Any]], path: Path, window: int = WINDOW) -> None:
    """Draw the curve as a PNG (each step's reward, its ``window``-step mean, the validation reward); only a log
    line where matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed: no %s (the eval extra installs it)", path.name)
        return
    fig, ax = plt.subplots(figsize=(6, 3.5))
    lines = (("reward_mean", "train", "o-", 0.45), ("reward_mean_window", f"train, {window}-step mean", "-", 1.0),
             ("val_reward_mean", "validation", "s--", 1.0))
    for key, label, style, alpha in lines:
        if points := [(r["step"], r[key]) for r in curve if r.get(key) is not None]:
            ax.plot(*zip(*points, strict=True), style, label=label, markersize=3, alpha=alpha)
    ax.set(xlabel="step", ylabel="mean reward", title="reward per step")
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def write_reward_curve(metrics_path: str | Path, out_dir: str | Path, window: int = WINDOW) -> list[dict[str, Any]]:
    """Write ``reward_curve.json`` and ``reward_curve.png`` into ``out_dir``; returns the curve."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    curve = read_curve(metrics_path, window)
    (out / "reward_curve.json").write_text(json.dumps(curve, indent=1) + "\n", encoding="utf-8")
    plot_curve(curve, out / "reward_curve.png", window=window)
    return curve


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m audio_reward.trainer_plugin.reward_curve",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", help="verl's file-logger JSONL (VERL_FILE_LOGGER_PATH)")
    parser.add_argument("--out", required=True, help="folder for reward_curve.json and reward_curve.png")
    parser.add_argument("--window", type=int, default=WINDOW,
                        help=f"steps in the windowed mean reward_mean_window (default {WINDOW})")
    args = parser.parse_args(argv)
    if args.window < 1:
        parser.error(f"--window must be at least 1, got {args.window}")
    if not Path(args.metrics).is_file():
        parser.exit(2, f"no metrics file at {args.metrics}: run verl with trainer.logger including 'file'\n")
    curve = write_reward_curve(args.metrics, args.out, args.window)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logger.info("%d steps; reward %s; %d-step mean %s", len(curve), _first_last(curve, "reward_mean"), args.window,
                _first_last(curve, "reward_mean_window"))
    return 0


def _first_last(curve: Sequence[dict[str, Any]], key: str) -> str:
    values = [r[key] for r in curve if r[key] is not None]
    return f"{values[0]:.3f} -> {values[-1]:.3f}" if values else "none"


if __name__ == "__main__":
    raise SystemExit(main())
