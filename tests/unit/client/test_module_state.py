"""The client and the trainer plugin keep no mutable state at module level: caches belong to their owners."""

from __future__ import annotations

import collections
import importlib
import pkgutil
from types import ModuleType

import pytest

import audio_reward.scorer_client
import audio_reward.trainer_plugin

MUTABLE = (dict, list, set, bytearray, collections.deque)
ALLOWED = {
    "audio_reward.trainer_plugin.reward_manager.manager_class":
        "builds verl's manager class once, so Ray pickles it by reference to the same class",
}
"""Module-level caches that stay, and why (verl_omni_score.CLIENT_CACHE is a ClientCache, bounded and documented)."""


def _modules() -> list[ModuleType]:
    out = []
    for package in (audio_reward.scorer_client, audio_reward.trainer_plugin):
        for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
            try:
                out.append(importlib.import_module(info.name))
            except ImportError:  # an optional dependency (verl, matplotlib...) of this environment is missing
                continue
    return out


@pytest.mark.parametrize("module", _modules(), ids=lambda m: m.__name__)
def test_no_module_level_mutable_containers_or_caches(module: ModuleType) -> None:
    found = []
    for name, value in vars(module).items():
        if name.startswith("__") or f"{module.__name__}.{name}" in ALLOWED:
            continue
        own = getattr(value, "__module__", module.__name__) == module.__name__
        if isinstance(value, MUTABLE) or (own and hasattr(value, "cache_info")):
            found.append(f"{name} ({type(value).__name__})")
    assert not found, f"{module.__name__} keeps module-level state: {found}"
