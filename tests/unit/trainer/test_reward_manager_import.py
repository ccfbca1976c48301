"""``audio_reward.trainer_plugin.reward_manager`` imports without verl; its verl class needs verl only when used."""

from __future__ import annotations

import pickle
import subprocess
import sys

import pytest

from tests.testkit.server import REPO_ROOT

WITHOUT_VERL = """
import sys
sys.modules["verl"] = None  # as if verl were not installed
import audio_reward.trainer_plugin.reward_manager as rm
from audio_reward.trainer_plugin import register_with_verl
from audio_reward.trainer_plugin._verl import VerlUnavailableError
assert rm.REGISTERED_NAME == "audio_score" and rm.AudioScoreRewardMixin.run_single
assert register_with_verl() is False
try:
    rm.AudioScoreRewardManager
except VerlUnavailableError as exc:
    assert "verl" in str(exc) and "pip install" in str(exc), exc
    print("clear error")
"""


def test_the_module_imports_without_verl_and_the_class_raises_a_clear_error() -> None:
    out = subprocess.run([sys.executable, "-c", WITHOUT_VERL], cwd=REPO_ROOT, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clear error"


def test_with_verl_the_class_is_verls_reward_manager_built_once() -> None:
    base = pytest.importorskip("verl.experimental.reward_loop.reward_manager.base",
                               reason="needs verl: the trainer environment (scripts/envs/verl.sh)").RewardManagerBase
    import audio_reward.trainer_plugin.reward_manager as rm

    cls = rm.AudioScoreRewardManager
    assert issubclass(cls, base) and issubclass(cls, rm.AudioScoreRewardMixin)
    assert cls is rm.manager_class() and cls.__module__ == rm.__name__
    assert pickle.loads(pickle.dumps(cls)) is cls  # Ray ships it by reference


FAIL_CLOSED_WITHOUT_VERL = """
import sys
sys.modules["verl"] = None  # as if verl were not installed
from audio_reward.trainer_plugin._verl import VerlUnavailableError
try:
    import audio_reward.trainer_plugin.fail_closed
except VerlUnavailableError as exc:
    assert "verl.trainer.ppo.v1.replay_buffer" in str(exc) and "pip install" in str(exc), exc
    print("clear error")
"""


def test_the_fail_closed_sampler_without_verl_raises_the_plugins_clear_error() -> None:
    out = subprocess.run([sys.executable, "-c", FAIL_CLOSED_WITHOUT_VERL], cwd=REPO_ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "clear error"
