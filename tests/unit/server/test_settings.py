"""Settings: one typed object; flags over env over preset over defaults."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo

from audio_reward.scorer_server import cli
from audio_reward.scorer_server.engines import model_store
from audio_reward.scorer_server.flags import server_flags
from audio_reward.scorer_server.presets import PRESETS
from audio_reward.scorer_server.settings import ServerSettings
from tests.testkit.extras import installed
from tests.testkit.server import parse_serve_args


def _fields(model: type, prefix: str = "") -> dict[str, FieldInfo]:
    """Every leaf field of a settings model by its dotted path (nested models flattened)."""
    out: dict[str, FieldInfo] = {}
    for name, info in model.model_fields.items():
        if isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel):
            out |= _fields(info.annotation, f"{prefix}{name}.")
        else:
            out[prefix + name] = info
    return out


_SAMPLES: dict[str, tuple[list[str], object]] = {
    "engine_options": (["--engine-option", "k=v"], {"k": "v"}),
    "served_model_name": (["--served-model-name", "zz", "whisper-1"], ("zz", "whisper-1")),
    "preset": (["--preset", "fast-en"], "fast-en"),
    "engine": (["--engine", "transformers"], "transformers"),
    "reward.formula": (["--reward-formula", "tanh"], "tanh"),
    "reward.metric": (["--reward-metric", "wer"], "wer"),
    "log_json": (["--log-json"], True),
    "access_log": (["--access-log"], True),
    "early_refusal": (["--no-early-refusal"], False),
    "reward.speaker_floor": (["--reward-speaker-floor", "0.5"], 0.5),
    "speaker_model": (["--speaker-model", "resemblyzer"], "resemblyzer"),
    "quality_model": (["--quality-model", "dnsmos"], "dnsmos"),
    "quality_windows": (["--quality-windows", "whole"], "whole"),
}


def _sample(path: str, info: FieldInfo) -> tuple[list[str], object]:
    """Flag words that set ``path`` to a valid value other than its default, and that value."""
    if path in _SAMPLES:
        return _SAMPLES[path]
    flag = "--" + path.replace(".", "-").replace("_", "-")
    text = str(info.annotation)
    if "int" in text:
        value: object = (info.default or 1) * 2
    elif "float" in text:
        value = (info.default or 0.25) * 2
    else:
        value = "zz"
    return [flag, str(value)], value


def test_every_setting_has_a_flag_and_the_flag_sets_it(tmp_path: Path) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("k\n")
    fields = _fields(ServerSettings)
    assert "api_key" in fields and "reward.exp_k" in fields
    for path, info in fields.items():
        if path == "api_key":
            continue  # never a flag: --api-key-file or the environment give it
        words, expected = (["--api-key-file", str(key_file)], key_file) if path == "api_key_file" \
            else _sample(path, info)
        value: object = parse_serve_args(words)
        for part in path.split("."):
            value = getattr(value, part)
        assert value == expected, (path, words, value)
    assert "--api-key" not in {flag.option for flag in server_flags()}


def test_defaults_are_the_offline_embedded_model() -> None:
    s = ServerSettings()
    assert (s.engine, s.model, s.device, s.beam_size, s.host) == ("faster-whisper", "tiny.en", "auto", 1, "127.0.0.1")
    assert s.api_key is None


def test_flags_override_env_which_overrides_preset(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AUDIO_REWARD_SERVER_MAX_BATCH_SIZE", "4")
    monkeypatch.setenv("AUDIO_REWARD_SERVER_NORMALIZER", "seed-tts-eval")
    s = parse_serve_args(["--preset", "fast-en", "--model", "base", "--max-wait-ms", "2.5"])
    preset = PRESETS["fast-en"]
    assert s.model == "base"                       # flag beats preset
    assert s.normalizer == "seed-tts-eval"         # env beats preset
    assert s.engine == preset.engine and s.language == preset.language  # preset beats defaults
    assert s.max_batch_size == 4 and s.max_wait_ms == 2.5
    assert parse_serve_args(["--max-batch-size", "8"]).max_batch_size == 8  # flag beats env


def test_invalid_values_are_rejected() -> None:
    with pytest.raises(ValidationError):
        parse_serve_args(["--max-batch-size", "0"])
    with pytest.raises(ValidationError):
        parse_serve_args(["--reward-formula", "square"])
    with pytest.raises(ValidationError, match="invalid reward policy"):
        parse_serve_args(["--reward-duration-ratio-min", "3", "--reward-duration-ratio-max", "2"])
    with pytest.raises(ValueError, match="unknown preset"):
        parse_serve_args(["--preset", "nope"])


def test_api_key_from_env_or_file_is_masked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    key_file = tmp_path / "key"
    key_file.write_text("from-file-key\n")
    s = parse_serve_args(["--api-key-file", str(key_file)])
    assert s.api_key is not None and s.api_key.get_secret_value() == "from-file-key"
    assert s.describe()["api_key"] == "**********" and "from-file-key" not in repr(s.describe())
    monkeypatch.setenv("AUDIO_REWARD_API_KEY", "from-env-key")
    assert parse_serve_args([]).api_key.get_secret_value() == "from-env-key"  # type: ignore[union-attr]
    empty = tmp_path / "empty"
    empty.write_text("")
    with pytest.raises(ValidationError, match="API key"):
        parse_serve_args(["--api-key-file", str(empty)])


def test_reward_policy_follows_settings() -> None:
    policy = parse_serve_args(["--reward-formula", "tanh", "--reward-repeat-penalty", "0.5"]).reward
    assert policy.formula == "tanh" and policy.repeat_penalty == 0.5


def test_the_extras_check_looks_at_the_model_the_settings_resolve(monkeypatch: pytest.MonkeyPatch) -> None:
    # The packaged-model check follows --preset and AUDIO_REWARD_SERVER_PRESET, not only --model.
    monkeypatch.delenv("AUDIO_REWARD_SERVER_MODEL", raising=False)
    for name, (extra, _) in list(model_store.PACKAGED_EXTRAS.items()):
        monkeypatch.setitem(model_store.PACKAGED_EXTRAS, name, (extra, ("module_that_is_not_installed",)))
    packaged = dataclasses.replace(PRESETS["fast-en"], name="packaged-base", engine="faster-whisper", model="base",
                                   engine_models={})
    monkeypatch.setitem(PRESETS, packaged.name, packaged)
    assert cli._missing_extras(parse_serve_args(["--preset", "packaged-base"]))[0] == ["base-model"]
    monkeypatch.setenv("AUDIO_REWARD_SERVER_PRESET", "qwen3-asr")  # a hub model: no packaged extra, not tiny.en's
    # Its engine's extra is named only where it is missing (the dev environment has no transformers).
    assert cli._missing_extras(parse_serve_args([]))[0] == ([] if installed("transformers") else ["transformers"])


def test_served_model_name_takes_several_names_like_vllm_serve(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_serve_args(["--served-model-name", "openai/whisper-large-v3", "whisper-1"]).served_model_name == (
        "openai/whisper-large-v3", "whisper-1")
    assert parse_serve_args(["--served-model-name", "whisper-1"]).served_model_name == ("whisper-1",)
    monkeypatch.setenv("AUDIO_REWARD_SERVER_SERVED_MODEL_NAME", "whisper-1, tiny")
    assert ServerSettings().served_model_name == ("whisper-1", "tiny")
    monkeypatch.setenv("AUDIO_REWARD_SERVER_SERVED_MODEL_NAME", '["a", "b", "a"]')
    assert ServerSettings().served_model_name == ("a", "b")
    with pytest.raises(ValidationError, match="non-empty names"):
        ServerSettings(served_model_name=["a", " "])
