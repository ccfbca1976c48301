"""``audio-reward preflight`` where hydra is not installed says which environment to run it in."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest


@pytest.mark.skipif(importlib.util.find_spec("hydra") is not None, reason="hydra is installed in this environment")
def test_preflight_without_hydra_names_the_trainer_environment() -> None:
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", "preflight", "qwen3_tts_grpo"],
                          capture_output=True, text=True)
    assert proc.returncode == 1
    assert "hydra is not installed in this environment" in proc.stdout
    assert "trainer environment" in proc.stdout and "scripts/envs/verl.sh" in proc.stdout
    assert "Traceback" not in proc.stdout + proc.stderr
