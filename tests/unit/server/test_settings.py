"""Settings: one typed object; flags over env over preset over defaults."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest
from pydantic import ValidationError

from audio_reward.scorer_server import cli
from audio_reward.scorer_server.presets import PRESETS
from audio_reward.scorer_server.settings import ServerSettings


def parse(argv: list[str]) -> ServerSettings:
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    return ServerSettings(**cli.overrides_from_args(parser.parse_args(["serve", *argv])))


def test_every_setting_has_a_flag_except_the_secret() -> None:
    flags = {name for name in cli.overrides_from_args(argparse.Namespace(**{
        f.replace("-", "_"): 1 for f, _, _ in cli.FLAGS} | {"log_json": True, "engine_option": ["k=v"]}))}
    assert flags == set(ServerSettings.model_fields) - {"api_key"}


def test_defaults_are_the_offline_embedded_model() -> None:
    s = ServerSettings()
    assert (s.engine, s.model, s.device, s.beam_size, s.host) == ("faster-whisper", "tiny.en", "cpu", 1, "127.0.0.1")
    assert s.api_key is None


def test_flags_override_env_which_overrides_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIO_REWARD_MAX_BATCH_SIZE", "4")
    monkeypatch.setenv("AUDIO_REWARD_NORMALIZER", "seed-tts-eval")
    s = parse(["--preset", "fast-en", "--model", "base", "--max-wait-ms", "2.5"])
    preset = PRESETS["fast-en"]
    assert s.model == "base"                       # flag beats preset
    assert s.normalizer == "seed-tts-eval"         # env beats preset
    assert s.engine == preset.engine and s.language == preset.language  # preset beats defaults
    assert s.max_batch_size == 4 and s.max_wait_ms == 2.5
    assert parse(["--max-batch-size", "8"]).max_batch_size == 8  # flag beats env


def test_invalid_values_are_rejected() -> None:
    with pytest.raises(ValidationError):
        parse(["--max-batch-size", "0"])
    with pytest.raises(ValidationError):
        parse(["--reward-formula", "square"])
    with pytest.raises(ValidationError, match="invalid reward policy"):
        parse(["--duration-ratio-min", "3", "--duration-ratio-max", "2"])
    with pytest.raises(ValueError, match="unknown preset"):
        parse(["--preset", "nope"])


def test_api_key_from_env_or_file_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("from-file-key\n")
    s = parse(["--api-key-file", str(key_file)])
    assert s.api_key is not None and s.api_key.get_secret_value() == "from-file-key"
    assert s.describe()["api_key"] == "**********" and "from-file-key" not in repr(s.describe())
    monkeypatch.setenv("AUDIO_REWARD_API_KEY", "from-env-key")
    assert parse([]).api_key.get_secret_value() == "from-env-key"  # type: ignore[union-attr]
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(ValidationError, match="API key"):
        parse(["--api-key-file", str(empty)])


def test_reward_policy_follows_settings() -> None:
    policy = parse(["--reward-formula", "tanh", "--repeat-penalty", "0.5"]).reward_policy()
    assert policy.formula == "tanh" and policy.repeat_penalty == 0.5
