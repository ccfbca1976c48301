"""Validation artifacts written by the reward manager: folders per pass, the WAVs, metrics.json (no verl needed)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audio_reward.trainer_plugin.validation_log import ValidationLogger

TONE = (0.1 * np.sin(np.linspace(0, 200, 16000))).astype(np.float32)


def test_passes_without_a_step_number_reference_and_target(tmp_path: Path) -> None:
    reference, target = tmp_path / "ref.flac", tmp_path / "target.wav"
    sf.write(reference, TONE, 16000)
    sf.write(target, TONE, 16000)
    logger = ValidationLogger(tmp_path / "val", max_wavs=1, reference_audio=reference)
    for _ in range(2):  # two validation runs over the same fixed set
        logger.log_sample("a", waveform=TONE, sample_rate=16000, text="first", score=0.8,
                          diagnostics={"cer": 0.2, "duration_ratio": 1.1, "score_failed": 0.0}, target_audio=target)
        logger.log_sample("b", waveform=TONE, sample_rate=16000, text="second", score=0.0,
                          diagnostics={"cer": float("nan"), "score_failed": 1.0})
    passes = logger.passes()
    assert [p.name for p in passes] == ["pass_0000", "pass_0001"]
    for folder in passes:
        assert sorted(p.name for p in folder.glob("*.wav")) == ["reference.wav", "sample_000.wav", "target_000.wav"]
        metrics = logger.metrics(folder)
        # a failed sample's score is a placeholder: it is left out of the mean
        assert (metrics["count"], metrics["failed"], metrics["wavs"]) == (2, 1, 1)
        assert metrics["mean_reward"] == pytest.approx(0.8) and metrics["mean_cer"] == pytest.approx(0.2)
        assert metrics["mean_duration_ratio"] == pytest.approx(1.1)
        assert metrics["policy_loss"] is None and metrics["kl_loss"] is None
    assert logger.problems() == []


def test_problems_and_bad_reference(tmp_path: Path) -> None:
    assert "no validation pass wrote artifacts" in ValidationLogger(tmp_path / "none").problems()[0]
    with pytest.raises(FileNotFoundError, match="reference_audio"):
        ValidationLogger(tmp_path / "val", reference_audio=tmp_path / "missing.wav")
