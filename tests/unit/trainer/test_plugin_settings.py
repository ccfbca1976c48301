"""The plugin's settings: the verl config block over AUDIO_REWARD_TRAINER_*, holding the client's settings."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from audio_reward.scorer_client import ClientSettings, ScoreItem
from audio_reward.scorer_client.wire import prepare
from audio_reward.trainer_plugin.preflight import check_reward_wiring
from audio_reward.trainer_plugin.settings import FailurePolicy, PluginSettings


@pytest.fixture
def env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [k for k in os.environ if k.startswith("AUDIO_REWARD_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def block(**keys: object) -> dict[str, object]:
    return {"reward": {"audio_reward": keys}}


def test_client_keys_of_the_block_go_to_the_contained_client_settings(env: pytest.MonkeyPatch) -> None:
    s = PluginSettings.from_config(block(server_url="http://a:1, http://b:2", timeout=5, max_retries=0,
                                         chunk_size=8, failure_policy="mask", diagnostics=["cer"]))
    assert isinstance(s.client, ClientSettings)
    assert s.server_url == s.client.urls == ("http://a:1", "http://b:2")
    assert (s.client.timeout, s.client.max_retries, s.client.chunk_size) == (5.0, 0, 8)
    assert s.failure_policy is FailurePolicy.MASK and s.diagnostics == ("cer",)
    with pytest.raises(ValueError, match=r"unknown keys in reward\.audio_reward: \['bogus'\]"):
        PluginSettings.from_config(block(server_url="http://a:1", bogus=1))


def test_each_part_reads_its_own_variables(env: pytest.MonkeyPatch) -> None:
    env.setenv("AUDIO_REWARD_URL", "http://shared:1")
    env.setenv("AUDIO_REWARD_API_KEY", "shared-key")
    env.setenv("AUDIO_REWARD_SERVER_LANGUAGE", "en")  # the server's default language: not the plugin's
    env.setenv("AUDIO_REWARD_LANGUAGE", "en")  # the name both once read: now neither part's
    env.setenv("AUDIO_REWARD_TRAINER_LANGUAGE", "zh")
    env.setenv("AUDIO_REWARD_TRAINER_DIAGNOSTICS", "cer, wer")
    env.setenv("AUDIO_REWARD_CLIENT_MAX_RETRIES", "9")
    s = PluginSettings.from_config(block(failure_log="/tmp/f.jsonl"))
    assert s.language == "zh" and s.diagnostics == ("cer", "wer") and s.failure_log == "/tmp/f.jsonl"
    assert s.server_url == ("http://shared:1",) and s.client.api_key == "shared-key" and s.client.max_retries == 9
    assert s.describe()["client"]["api_key"] == "**********"
    # The config block wins over the environment.
    assert PluginSettings.from_config(block(language="fr", max_retries=1)).language == "fr"
    assert PluginSettings.from_config(block(max_retries=1)).client.max_retries == 1


def test_no_url_and_bad_values_are_refused(env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match=r"no scorer URL: set reward\.audio_reward\.server_url"):
        PluginSettings.from_config(block())
    for bad in ({"diagnostics": ["score"]}, {"failure_policy": "ignore"}, {"max_batch": 0}, {"timeout": -1}):
        with pytest.raises(ValueError):
            PluginSettings.from_config(block(server_url="http://a:1", **bad))


def test_empty_values_are_unset(env: pytest.MonkeyPatch) -> None:
    # A shell's `export AUDIO_REWARD_API_KEY=` or a launch script's server_url="$SCORER_URL" with the variable unset.
    env.setenv("AUDIO_REWARD_URL", "http://shared:1")
    env.setenv("AUDIO_REWARD_API_KEY", "")
    env.setenv("AUDIO_REWARD_CLIENT_TIMEOUT", "")
    env.setenv("AUDIO_REWARD_TRAINER_LANGUAGE", "")
    for empty in ("", [], ()):
        s = PluginSettings.from_config(block(server_url=empty))
        assert s.client.urls == ("http://shared:1",)
        assert s.client.api_key is None and s.client.timeout == ClientSettings("http://x:1").timeout
        assert s.language is None


def test_reward_options_are_checked_when_the_settings_are_built(env: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError) as info:
        PluginSettings.from_config(block(server_url="http://a:1", reward={"formula": "exp", "exp_k": -1}))
    assert str(info.value) == "reward.exp_k: Input should be greater than 0"
    with pytest.raises(ValueError, match=r"^reward\.bogus: Extra inputs are not permitted$"):
        PluginSettings.from_config(block(server_url="http://a:1", reward={"bogus": 1}))
    (check,) = check_reward_wiring({"reward": {"reward_manager": {"name": "audio_score"},
                                               "audio_reward": {"reward": {"exp_k": "x"}}}})
    assert not check.ok and "\n" not in check.message
    assert check.message.startswith("reward.audio_reward: reward.exp_k: Input should be a valid number")


def test_only_the_reward_options_set_are_sent(env: pytest.MonkeyPatch) -> None:
    s = PluginSettings.from_config(block(server_url="http://a:1", reward={"formula": "exp", "exp_k": 2}))
    body = json.loads(prepare(ScoreItem(np.zeros(160, np.float32), 16000, "t", reward=s.reward)).body)
    assert body["reward"] == {"formula": "exp", "exp_k": 2.0}
    assert s.describe()["reward"] == {"formula": "exp", "exp_k": 2.0}
    env.setenv("AUDIO_REWARD_TRAINER_REWARD", '{"formula": "tanh"}')
    assert PluginSettings.from_config(block(server_url="http://a:1")).describe()["reward"] == {"formula": "tanh"}
    env.delenv("AUDIO_REWARD_TRAINER_REWARD")
    for unset in (None, {}):
        s = PluginSettings.from_config(block(server_url="http://a:1", reward=unset))
        assert s.reward is None
        assert "reward" not in json.loads(prepare(ScoreItem(np.zeros(160, np.float32), 16000, "t",
                                                            reward=s.reward)).body)
