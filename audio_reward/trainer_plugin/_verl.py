"""verl's extension points, imported in one place with a clear error when absent.

The plugin targets verl >= 0.9 with the reward-loop API
(``verl.experimental.reward_loop``); verl-omni pins verl by git commit, so
only the names below are relied on, never a version number.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from audio_reward.extras import install_command

REQUIREMENT = f"verl>=0.9 with the reward-loop API ({install_command('verl')} in an audio-reward checkout)"


def with_external_modules(environ: Mapping[str, str], first: Sequence[str] = (), last: Sequence[str] = ()) -> str:
    """``VERL_USE_EXTERNAL_MODULES`` (the modules ``import verl`` imports in every process) with ``first`` put
    before its modules and each of ``last`` it lacks after them; the ones already listed keep their order.
    """
    names = (m.strip() for m in environ.get("VERL_USE_EXTERNAL_MODULES", "").split(","))
    present = [m for m in names if m and m not in first]
    return ",".join([*first, *present, *(m for m in last if m not in present)])


class VerlUnavailableError(ImportError):
    """verl, or one of the extension points the plugin needs, cannot be imported."""


def _import(module: str, name: str) -> Any:
    try:
        mod = __import__(module, fromlist=[name])
    except ImportError as exc:
        raise VerlUnavailableError(
            f"cannot import {module} ({exc}); the audio-reward verl plugin needs {REQUIREMENT}"
        ) from exc
    try:
        return getattr(mod, name)
    except AttributeError:
        raise VerlUnavailableError(
            f"{module} has no {name}; the audio-reward verl plugin needs {REQUIREMENT}"
        ) from None


def reward_manager_base() -> type:
    return _import("verl.experimental.reward_loop.reward_manager.base", "RewardManagerBase")


def reward_manager_registry() -> dict[str, type]:
    return _import("verl.experimental.reward_loop.reward_manager.registry", "REWARD_MANAGER")


def core_algos() -> Any:
    return _import("verl.trainer.ppo", "core_algos")


def replay_buffers() -> tuple[Any, Any]:
    """verl v1's ``ReplayBuffer`` (trainer mode ``sync``) and ``ReplayBufferAsync`` (every other mode).

    verl before its async buffer (verl-omni's pin 8a694930 before the Qwen3-TTS merge, 0.9.0.dev0) has one
    ``ReplayBuffer`` for every trainer mode, which samples failed groups as they are (its ``replay_buffer.py``
    lines 142-150, 220-223): there it stands for both.
    """
    module = "verl.trainer.ppo.v1.replay_buffer"
    sync = _import(module, "ReplayBuffer")
    try:
        return sync, _import(module, "ReplayBufferAsync")
    except VerlUnavailableError:
        return sync, sync


def verl_available() -> bool:
    """True when the reward-loop API imports (no error raised)."""
    try:
        reward_manager_base()
    except VerlUnavailableError:
        return False
    return True
