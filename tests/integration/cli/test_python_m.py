"""``python -m audio_reward`` is the ``audio-reward`` command (issue 40, finding 12)."""

from __future__ import annotations

import subprocess
import sys

from audio_reward import __version__
from tests.testkit.server import REPO_ROOT


def test_python_m_audio_reward_runs_the_command_line() -> None:
    done = subprocess.run([sys.executable, "-m", "audio_reward", "--version"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == f"audio-reward {__version__}"


def test_python_m_audio_reward_passes_the_exit_status_on() -> None:
    done = subprocess.run([sys.executable, "-m", "audio_reward", "validate", "/nonexistent.json"], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "Traceback" not in done.stderr
