"""``audio-reward serve --config FILE`` (issue 40, finding 8): TOML or YAML, the flags' keys, flags > environment
variables > file > preset > defaults, and where each setting came from."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from audio_reward.scorer_server.flags import describe_invalid, server_flags
from audio_reward.scorer_server.presets import PRESETS
from audio_reward.scorer_server.settings import ConfigFileError, ServerSettings, setting_sources
from tests.testkit.server import parse_serve_args
from tests.unit.server.test_settings import _fields, _sample

TOML = """\
max-batch-size = 8
model = "base"
engine-option = ["batched=false"]
served-model-name = ["whisper-1", "tiny"]
reward-metric = "wer"

[reward]
formula = "exp"
exp-k = 3.0
"""

YAML = """\
max_batch_size: 8
model: base
engine_options: {batched: "false"}
served_model_name: [whisper-1, tiny]
reward:
  metric: wer
  formula: exp
  exp_k: 3.0
"""


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in [k for k in os.environ if k.startswith("AUDIO_REWARD_")]:
        monkeypatch.delenv(name)
    return monkeypatch


def _write(tmp_path: Path, name: str, text: str) -> Path:
    (tmp_path / name).write_text(text)
    return tmp_path / name


@pytest.mark.parametrize(("name", "text"), [("serve.toml", TOML), ("serve.yaml", YAML), ("serve.yml", YAML)])
def test_a_toml_or_yaml_file_sets_what_the_flags_set(tmp_path: Path, name: str, text: str) -> None:
    from_file = parse_serve_args(["--config", str(_write(tmp_path, name, text))])
    from_flags = parse_serve_args(["--max-batch-size", "8", "--model", "base", "--engine-option", "batched=false",
                                   "--served-model-name", "whisper-1", "tiny", "--reward-metric", "wer",
                                   "--reward-formula", "exp", "--reward-exp-k", "3"])
    assert from_file.describe() == from_flags.describe() != ServerSettings().describe()


def test_every_flag_is_a_key_of_the_file(tmp_path: Path) -> None:
    key_file = _write(tmp_path, "key", "k\n")
    options = {flag.path: flag.option for flag in server_flags()}
    for path, info in _fields(ServerSettings).items():
        if path in ("api_key", "engine_options", "served_model_name"):
            continue  # no flag of their own form (tested above), or never from a file (below)
        words, expected = (["--api-key-file", str(key_file)], key_file) if path == "api_key_file" \
            else _sample(path, info)
        value = json.dumps(True if len(words) == 1 and not words[0].startswith("--no-") else
                           False if len(words) == 1 else words[1] if isinstance(expected, (str, Path)) else expected)
        key = options[tuple(path.split("."))][2:]
        settings: object = parse_serve_args(["--config", str(_write(tmp_path, "one.toml", f"{key} = {value}\n"))])
        for part in path.split("."):
            settings = getattr(settings, part)
        assert settings == expected, (path, key, value)


def test_flags_beat_variables_beat_the_file_beats_the_preset(tmp_path: Path, no_env: pytest.MonkeyPatch) -> None:
    config = _write(tmp_path, "serve.toml", 'preset = "fast-en"\nmodel = "base"\nmax-queue = 7\nmax-batch-size = 8\n'
                                            "max-wait-ms = 4.0\n")
    no_env.setenv("AUDIO_REWARD_SERVER_MAX_BATCH_SIZE", "4")
    no_env.setenv("AUDIO_REWARD_SERVER_MAX_WAIT_MS", "2.0")
    settings = parse_serve_args(["--config", str(config), "--max-wait-ms", "1.0"])
    assert settings.max_wait_ms == 1.0      # flag over variable over file
    assert settings.max_batch_size == 4     # variable over file
    assert settings.max_queue == 7          # file over default
    assert settings.model == "base"         # file over preset
    assert settings.normalizer == PRESETS["fast-en"].normalizer != "basic"  # preset over default
    sources = setting_sources({"max_wait_ms": 1.0}, config)
    assert sources["max_wait_ms"] == "flag --max-wait-ms"
    assert sources["max_batch_size"] == "env AUDIO_REWARD_SERVER_MAX_BATCH_SIZE"
    assert sources["max_queue"] == sources["model"] == sources["preset"] == f"config {config}"
    assert sources["normalizer"] == "preset fast-en" and "port" not in sources  # the default


def test_sources_name_the_nested_variable_and_the_key_file(tmp_path: Path, no_env: pytest.MonkeyPatch) -> None:
    key = _write(tmp_path, "key", "secret\n")
    no_env.setenv("AUDIO_REWARD_SERVER_REWARD__EXP_K", "3")
    no_env.setenv("audio_reward_server_port", "8123")
    sources = setting_sources({"api_key_file": key})
    assert sources["reward.exp_k"] == "env AUDIO_REWARD_SERVER_REWARD__EXP_K"
    assert sources["port"] == "env AUDIO_REWARD_SERVER_PORT"
    assert sources["api_key_file"] == "flag --api-key-file" and sources["api_key"] == "api_key_file"
    no_env.setenv("AUDIO_REWARD_API_KEY", "k")
    assert setting_sources()["api_key"] == "env AUDIO_REWARD_API_KEY"


@pytest.mark.parametrize(("name", "text", "says"), [
    ("serve.toml", "max-batchsize = 8\n", "unknown setting 'max-batchsize' (did you mean max_batch_size?)"),
    ("serve.toml", 'api_key = "secret"\n', "the API key is not read from a config file"),
    ("serve.toml", "max-batch-size = \n", "not a TOML table of settings: Invalid value"),
    ("serve.yaml", "max_batch_size: [\n", "not a YAML table of settings"),
    ("serve.ini", "max_batch_size = 8\n", "a .toml, .yaml or .yml file"),
    ("missing.toml", None, "no such file"),
])
def test_a_file_that_cannot_be_used_is_one_line_naming_it(tmp_path: Path, name: str, text: str | None,
                                                          says: str) -> None:
    path = tmp_path / name if text is None else _write(tmp_path, name, text)
    with pytest.raises(ConfigFileError) as info:
        parse_serve_args(["--config", str(path)])
    assert str(info.value).startswith(f"--config {path}: ") and says in str(info.value)
    assert "\n" not in str(info.value) and "secret" not in str(info.value)


def test_a_bad_value_from_the_file_is_named_in_the_file(tmp_path: Path) -> None:
    from pydantic import ValidationError

    config = _write(tmp_path, "serve.toml", "max-batch-size = 0\n")
    with pytest.raises(ValidationError) as info:
        parse_serve_args(["--config", str(config)])
    assert describe_invalid(info.value, setting_sources({}, config)) == (
        f"max_batch_size = 0 in {config}: input should be greater than or equal to 1")
    with pytest.raises(ValidationError) as info:
        parse_serve_args(["--config", str(config), "--max-batch-size", "-1"])
    assert describe_invalid(info.value, setting_sources({"max_batch_size": -1}, config)).startswith(
        "--max-batch-size -1: ")


def test_the_docs_examples_load_and_say_the_same(tmp_path: Path) -> None:
    """docs/server.md's serve.toml and serve.yaml, as written there."""
    import re

    from tests.testkit.server import REPO_ROOT

    doc = (REPO_ROOT / "docs" / "server.md").read_text(encoding="utf-8")
    toml = re.search(r"```toml\n(# serve\.toml\n.*?)```", doc, re.S)
    yaml = re.search(r"```yaml\n(# serve\.yaml.*?)```", doc, re.S)
    assert toml and yaml
    loaded = [parse_serve_args(["--config", str(_write(tmp_path, name, block[1]))])
              for name, block in (("serve.toml", toml), ("serve.yaml", yaml))]
    assert loaded[0].describe() == loaded[1].describe()
    assert (loaded[0].max_batch_size, loaded[0].reward.exp_k, loaded[0].access_log) == (32, 2.5, True)
    assert loaded[0].engine_options == {"batched": "true"}
