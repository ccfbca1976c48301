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
- ``target_<i>.wav``: the recording of sample *i*'s text, when its row has one
  (``extra_info["target_audio"]``),
- ``reference.wav``: the speaker prompt the run conditions on (``reference_audio``),
- ``samples.jsonl``: one line per scored sample (key, target text, score, diagnostics),
- ``metrics.json``: verl-omni's recipe fields (``mean_reward``, ``mean_cer``,
  ``mean_duration_ratio``, and ``policy_loss`` / ``kl_loss``, which are null at a
  validation step: no update runs there), then count, failures and the mean of
  every numeric field, rewritten as samples arrive so it is complete when the pass ends.

:meth:`ValidationLogger.problems` lists the passes that wrote no audio; the
recipes' ``run.sh`` ends with an error when there is one (or no pass at all).

Several reward workers (separate processes) may log at once: every write holds
an ``fcntl`` lock on ``<root>/.lock`` and metrics are recomputed from
``samples.jsonl``, so the files stay whole and consistent.
"""

from __future__ import annotations

import fcntl
import itertools
import json
import math
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import soundfile as sf

from ..protocol.audio import read_audio
from .reward_curve import read_json_lines


def _read_lines(path: Path) -> list[dict[str, Any]]:
    return read_json_lines(path) if path.exists() else []


class ValidationLogger:
    """Writes validation WAVs, per-sample lines and per-pass metrics under ``root``.

    ``max_wavs`` (>= 0) comes from the validated :class:`~.settings.PluginSettings` (``validation_max_wavs``).
    """

    def __init__(self, root: str | Path, max_wavs: int = 4, reference_audio: str | Path | None = None) -> None:
        self.root = Path(root)
        self.max_wavs = max_wavs
        self.reference_audio = Path(reference_audio) if reference_audio else None
        if self.reference_audio is not None and not self.reference_audio.is_file():
            raise FileNotFoundError(f"reference_audio {self.reference_audio} does not exist")

    def _pass_dir(self, key: str, step: int | None) -> Path:
        if step is not None:
            return self.root / f"step_{step:06d}"
        # the first pass that has not scored this sample yet
        passes = (self.root / f"pass_{k:04d}" for k in itertools.count())
        return next(d for d in passes if all(line.get("key") != key for line in _read_lines(d / "samples.jsonl")))

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
        target_audio: str | Path | None = None,
    ) -> None:
        """Record one scored validation sample; ``key`` identifies it across passes.

        ``target_audio`` is the row's recording of ``text``; it is copied beside the sample's WAV.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / ".lock", "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            directory = self._pass_dir(key, step)
            directory.mkdir(parents=True, exist_ok=True)
            wav_name = target_name = None
            if self.reference_audio is not None and not (directory / "reference.wav").exists():
                _copy_audio(self.reference_audio, directory / "reference.wav")
            count = len(list(directory.glob("sample_*.wav")))
            if count < self.max_wavs:
                wav_name = f"sample_{count:03d}.wav"
                sf.write(directory / wav_name, np.clip(waveform, -1.0, 1.0), sample_rate, subtype="PCM_16")
                if target_audio:
                    target_name = f"target_{count:03d}.wav"
                    _copy_audio(Path(target_audio), directory / target_name)
            line = {"key": key, "text": text, "score": score, "wav": wav_name, "target_wav": target_name,
                    **dict(diagnostics)}
            with open(directory / "samples.jsonl", "a", encoding="utf-8") as fh:
                fh.write(json.dumps(line, ensure_ascii=False, default=str) + "\n")
            self._write_metrics(directory, step)

    @staticmethod
    def _write_metrics(directory: Path, step: int | None) -> None:
        lines = _read_lines(directory / "samples.jsonl")
        values: dict[str, list[float]] = {}  # every finite number (a bool is 0 or 1) of every line, by key
        for line in lines:
            for key, value in line.items():
                # A failed sample's score is a placeholder, not a measurement.
                if isinstance(value, (int, float)) and math.isfinite(value) and not (
                        key == "score" and line.get("score_failed")):
                    values.setdefault(key, []).append(float(value))
        means = {k: sum(v) / len(v) for k, v in sorted(values.items())}
        metrics = {
            "mean_reward": means.get("score"),
            "mean_cer": means.get("cer"),
            "mean_duration_ratio": means.get("duration_ratio"),
            # a validation step runs no update: verl-omni's recipe keeps the loss fields, null
            "policy_loss": None,
            "kl_loss": None,
            "pass": directory.name,
            "step": step,
            "count": len(lines),
            "failed": sum(bool(line.get("score_failed")) for line in lines),
            "wavs": len(list(directory.glob("sample_*.wav"))),
            "mean": means,
        }
        tmp = directory / "metrics.json.tmp"
        tmp.write_text(json.dumps(metrics, indent=2, sort_keys=True), encoding="utf-8")
        tmp.replace(directory / "metrics.json")

    def passes(self) -> list[Path]:
        """The pass folders written so far, in order."""
        return sorted(p for p in self.root.glob("*_*") if p.is_dir() and (p / "metrics.json").exists())

    def problems(self) -> list[str]:
        """What makes the validation artifacts unusable: no pass at all, or a pass that wrote no audio."""
        passes = self.passes()
        if not passes:
            return [(f"no validation pass wrote artifacts under {self.root} (did the validation samples carry "
                     "extra_info.split=val, and did the reward manager run?)")]
        return [f"validation pass {p} wrote no audio ({self.metrics(p)['count']} samples scored)"
                for p in passes if not list(p.glob("sample_*.wav"))]

    @staticmethod
    def metrics(directory: str | Path) -> dict[str, Any]:
        """The metrics of one pass folder."""
        return json.loads((Path(directory) / "metrics.json").read_text(encoding="utf-8"))


def _copy_audio(source: Path, dest: Path) -> None:
    """Copy a WAV as is; any other format the protocol's reader reads is written as 16-bit mono WAV."""
    if source.suffix.lower() == ".wav":
        shutil.copyfile(source, dest)
        return
    sf.write(dest, *read_audio(source), subtype="PCM_16")
