"""The reward curve of a verl run: one JSON record per step and a PNG, from verl's file logger.

The published GRPO runs are judged by this curve.  verl writes every step's
metrics as a JSON line when ``trainer.logger`` includes ``file``
(``verl/utils/tracking.py``, ``FileLogger``; the path is
``VERL_FILE_LOGGER_PATH``).  :func:`write_reward_curve` reads that file and
writes ``reward_curve.json`` (a list of ``{"step", "reward_mean", ...}``, the
training reward of each step and, at the steps that validated, the validation
reward) and ``reward_curve.png``::

    python -m audio_reward.trainer_plugin.reward_curve METRICS.jsonl --out DIR
"""

from __future__ import annotations

import argparse
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


def _finite(value: Any) -> float | None:
    return float(value) if isinstance(value, (int, float)) and math.isfinite(value) else None


def _metric(data: dict[str, Any], suffix: str) -> float | None:
    return next((_finite(v) for k, v in data.items() if k == suffix or k.endswith("/" + suffix)), None)


def _val_reward(data: dict[str, Any]) -> float | None:
    found = (_finite(v) for k, v in data.items() if k.startswith("val-core/") and "/reward/mean" in k)
    values = [v for v in found if v is not None]
    return sum(values) / len(values) if values else None


def read_curve(metrics_path: str | Path) -> list[dict[str, Any]]:
    """One record per logged step, in step order: ``step``, ``reward_mean``, ``val_reward_mean`` and
    the :data:`CARRIED` figures (None where the step did not log one)."""
    by_step: dict[int, dict[str, Any]] = {}
    for line in Path(metrics_path).read_text(encoding="utf-8").splitlines():
        try:
            entry = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line cut short by a crash
        data, step = entry.get("data") or {}, entry.get("step")
        if not isinstance(step, int):
            continue
        record = by_step.setdefault(step, {"step": step, "reward_mean": None, "val_reward_mean": None,
                                           **dict.fromkeys(CARRIED)})
        updates = {"reward_mean": _finite(data.get(TRAIN_REWARD)), "val_reward_mean": _val_reward(data),
                   **{name: _metric(data, key) for name, key in CARRIED.items()}}
        record.update({k: v for k, v in updates.items() if v is not None})
    return [by_step[s] for s in sorted(by_step)]


def plot_curve(curve: Sequence[dict[str, Any]], path: Path, title: str = "reward per step") -> bool:
    """Draw the curve as a PNG; False (and a log line) where matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        logger.warning("matplotlib is not installed: no %s (the eval extra installs it)", path.name)
        return False
    fig, ax = plt.subplots(figsize=(6, 3.5))
    for key, label, style in (("reward_mean", "train", "o-"), ("val_reward_mean", "validation", "s--")):
        points = [(r["step"], r[key]) for r in curve if r.get(key) is not None]
        if points:
            ax.plot(*zip(*points, strict=True), style, label=label, markersize=3)
    ax.set_xlabel("step")
    ax.set_ylabel("mean reward")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return True


def write_reward_curve(metrics_path: str | Path, out_dir: str | Path) -> list[dict[str, Any]]:
    """Write ``reward_curve.json`` and ``reward_curve.png`` into ``out_dir``; returns the curve."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    curve = read_curve(metrics_path)
    (out / "reward_curve.json").write_text(json.dumps(curve, indent=1) + "\n", encoding="utf-8")
    plot_curve(curve, out / "reward_curve.png")
    return curve


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m audio_reward.trainer_plugin.reward_curve",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("metrics", help="verl's file-logger JSONL (VERL_FILE_LOGGER_PATH)")
    parser.add_argument("--out", required=True, help="folder for reward_curve.json and reward_curve.png")
    args = parser.parse_args(argv)
    if not Path(args.metrics).is_file():
        parser.exit(2, f"no metrics file at {args.metrics}: run verl with trainer.logger including 'file'\n")
    curve = write_reward_curve(args.metrics, args.out)
    rewards = [r["reward_mean"] for r in curve if r["reward_mean"] is not None]
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    logger.info("%d steps; reward %s", len(curve), f"{rewards[0]:.3f} -> {rewards[-1]:.3f}" if rewards else "none")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
