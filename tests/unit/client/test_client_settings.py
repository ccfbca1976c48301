"""ClientSettings over the environment: its own AUDIO_REWARD_CLIENT_* names and the shared ones."""

from __future__ import annotations

import os

import pytest

from audio_reward.scorer_client import ClientSettings


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [k for k in os.environ if k.startswith("AUDIO_REWARD_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def test_an_exported_but_empty_variable_is_unset(env: pytest.MonkeyPatch) -> None:
    env.setenv("AUDIO_REWARD_API_KEY", "")
    env.setenv("AUDIO_REWARD_CLIENT_TIMEOUT", "")
    s = ClientSettings("http://x:1")
    assert s.api_key is None and s.timeout == ClientSettings.model_fields["timeout"].default


def test_the_shared_key_is_read_and_the_clients_own_name_wins(env: pytest.MonkeyPatch) -> None:
    env.setenv("AUDIO_REWARD_API_KEY", "shared")
    assert ClientSettings("http://x:1").api_key == "shared"
    env.setenv("AUDIO_REWARD_CLIENT_API_KEY", "own")
    assert ClientSettings("http://x:1").api_key == "own"
