"""Validation artifacts: a few generated WAVs and one metrics file per validation pass.

:class:`ValidationLogger` is fed by :class:`AudioScoreRewardManager` for every
scored validation sample, and any trainer loop can feed it the same way.  A
sample counts as validation when verl marks its batch (``meta_info["validate"]``)
or when its ``extra_info["split"]`` names a validation split (verl's agent loop
computes rewards per sample, without the batch's flags, so the recipes' data
preparation writes ``split``).

Every pass gets a folder: ``step_<N>`` when verl passed ``global_steps``, else
``pass_<k>`` where pass *k* holds each validation sample's *k*-th scoring (the
validation set is fixed, so pass *k* is the *k*-th validation run; with
``val_before_train`` and ``test_freq=F`` it is global step ``k·F``).  In it:

- ``sample_<i>.wav``: the first ``max_wavs`` samples, 16-bit PCM at their own rate,
- ``samples.jsonl``: one line per scored sample (key, target text, score, diagnostics),
- ``metrics.json``: count, failures and the mean of every numeric field, rewritten
  as samples arrive so it is complete when the pass ends.

Several reward workers (separate processes) may log at once: every write holds
an ``fcntl`` lock on ``<root>/.lock`` and metrics are recomputed from
``samples.jsonl``, so the files stay whole and consistent.
"""

from __future__ import annotations

import fcntl
import json
import math
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import soundfile as sf


def _read_lines(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    with open(path, encoding="utf-8") as fh:
        return [json.loads(raw) for raw in fh if raw.strip()]


class ValidationLogger:
    """Writes validation WAVs, per-sample lines and per-pass metrics under ``root``."""

    def __init__(self, root: str | Path, max_wavs: int = 4) -> None:
        if max_wavs < 0:
            raise ValueError(f"max_wavs must be >= 0, got {max_wavs}")
        self.root = Path(root)
        self.max_wavs = max_wavs

    def _pass_dir(self, key: str, step: int | None) -> Path:
        if step is not None:
            return self.root / f"step_{step:06d}"
        k = 0
        while True:
            directory = self.root / f"pass_{k:04d}"
            if not any(line.get("key") == key for line in _read_lines(directory / "samples.jsonl")):
                return directory
            k += 1

    def log_sample(
        self,
        key: str,
        *,
        waveform: np.ndarray,
        sample_rate: int,
        text: str,
        score: float,
        diagnostics: Mapping[str, Any],
        step: int | None = None,
    ) -> Path:
        """Record one scored validation sample; ``key`` identifies it across passes. Returns its pass folder."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            directory = self._pass_dir(key, step)
            directory.mkdir(parents=True, exist_ok=True)
            wav_name = None
            if len(list(directory.glob("sample_*.wav"))) < self.max_wavs:
                wav_name = f"sample_{len(list(directory.glob('sample_*.wav'))):03d}.wav"
                sf.write(directory / wav_name, np.clip(waveform, -1.0, 1.0), sample_rate, subtype="PCM_16")
            line = {"key": key, "text": text, "score": score, "wav": wav_name, **dict(diagnostics)}
            with open(directory / "samples.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
            self._write_metrics(directory, step)
        return directory

    @staticmethod
    def _write_metrics(directory: Path, step: int | None) -> None:
        sums: dict[str, float] = {}
        counts: dict[str, int] = {}
        lines = _read_lines(directory / "samples.jsonl")
        failed = 0
        for line in lines:
            is_failed = bool(line.get("score_failed", 0))
            failed += int(is_failed)
            for key, value in line.items():
                if isinstance(value, bool):
                    value = float(value)
                # A failed sample's score is a placeholder, not a measurement.
                if not isinstance(value, (int, float)) or not math.isfinite(value) or (is_failed and key == "score"):
                    continue
                sums[key] = sums.get(key, 0.0) + float(value)
                counts[key] = counts.get(key, 0) + 1
        metrics = {
            "pass": directory.name,
            "step": step,
            "count": len(lines),
            "failed": failed,
            "wavs": len(list(directory.glob("sample_*.wav"))),
            "mean": {k: sums[k] / counts[k] for k in sorted(sums)},
        }
        tmp = directory / "metrics.json.tmp"
        tmp.write_text(json.dumps(metrics, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(directory / "metrics.json")

    def passes(self) -> list[Path]:
        """The pass folders written so far, in order."""
        return sorted(p for p in self.root.glob("*_*") if p.is_dir() and (p / "metrics.json").exists())

    @staticmethod
    def metrics(directory: str | Path) -> dict[str, Any]:
        """The metrics of one pass folder."""
        return json.loads((Path(directory) / "metrics.json").read_text(encoding="utf-8"))
