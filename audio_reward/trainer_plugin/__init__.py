"""verl plugin of audio-reward: a reward manager, reward functions and recipes.

Installing audio-reward registers :mod:`.verl_plugin` under verl's
``verl.plugins`` entry-point group, so ``import verl`` imports it in every verl
process; that registers :class:`~.reward_manager.AudioScoreRewardManager` as
reward manager ``audio_score`` and the ``grpo_masked`` advantage estimator.
This package itself imports no verl: ``audio-reward preflight`` and the
multiple-choice reward work without it.
"""

from __future__ import annotations

import logging

from .settings import FailurePolicy, PluginSettings

logger = logging.getLogger(__name__)

__all__ = ["FailurePolicy", "PluginSettings", "register_with_verl"]


def register_with_verl() -> bool:
    """Register the reward manager and the masked GRPO estimator with verl; False when verl is absent.

    Safe to call repeatedly and from verl's plugin loader.
    """
    from ._verl import (
        VerlUnavailableError,
        reward_manager_registry,
        verl_available,
    )

    if not verl_available():
        return False
    try:
        from . import advantage
        from .reward_manager import REGISTERED_NAME, AudioScoreRewardManager

        # set in verl's registry itself, not through its register(), which refuses a second class under a name:
        # a re-imported module's class replaces the old one
        reward_manager_registry()[REGISTERED_NAME] = AudioScoreRewardManager
        advantage.register()
    except VerlUnavailableError as exc:
        logger.warning("audio-reward: verl is installed but lacks an extension point: %s", exc)
        return False
    return True

