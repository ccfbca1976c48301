"""``--engine-option KEY=VALUE``: parsed, typed per engine, refused clearly, reported at start-up and in /v1/info."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import ClassVar

import httpx
import pytest

from audio_reward.cli import main as cli_main
from audio_reward.scorer_server.engines import (
    EngineConfig,
    EngineInfo,
    EngineOption,
    EngineOptionError,
    ThreadedEngine,
    Transcription,
    TranscriptionInput,
    create_engine,
    resolve_engine_options,
)
from tests.testkit.server import inprocess_server, parse_serve_args, running_server


def test_repeated_flags_fill_the_options_and_env_sets_them_too(monkeypatch: pytest.MonkeyPatch) -> None:
    s = parse_serve_args(["--engine-option", "max_num_seqs=128", "--engine-option", "enforce_eager = true"])
    assert s.engine_options == {"max_num_seqs": "128", "enforce_eager": "true"}
    monkeypatch.setenv("AUDIO_REWARD_SERVER_ENGINE_OPTIONS", "max_num_seqs=64,gpu_memory_utilization=0.5")
    assert parse_serve_args([]).engine_options == {"max_num_seqs": "64", "gpu_memory_utilization": "0.5"}
    monkeypatch.setenv("AUDIO_REWARD_SERVER_ENGINE_OPTIONS", '{"max_num_seqs": 32}')
    assert parse_serve_args([]).engine_options == {"max_num_seqs": 32}
    # The flag wins.
    assert parse_serve_args(["--engine-option", "batched=false"]).engine_options == {"batched": "false"}


def test_a_flag_without_an_equals_sign_is_refused() -> None:
    with pytest.raises(ValueError, match="not KEY=VALUE"):
        parse_serve_args(["--engine-option", "max_num_seqs"])


def test_values_are_converted_to_each_option_type_and_defaults_fill_the_rest() -> None:
    from audio_reward.scorer_server.engines.vllm_engine import VLLMEngine

    engine = VLLMEngine(EngineConfig(model="unused", options={"max_num_seqs": "64", "enforce_eager": "yes",
                                                              "max_model_len": "none"}))
    assert engine.options == {"max_num_seqs": 64, "gpu_memory_utilization": 0.85, "enforce_eager": True,
                              "max_model_len": None, "max_num_batched_tokens": None,
                              "kv_cache_memory_bytes": None}
    assert engine.schedules_itself and engine.max_concurrency == 64  # the server's admission bound


def test_unknown_keys_and_bad_values_get_a_clear_error_per_engine() -> None:
    with pytest.raises(
        EngineOptionError, match=r"engine 'faster-whisper' has no option 'max_num_seqs' \(its options: batched\)"
    ):
        create_engine("faster-whisper", EngineConfig(model="tiny.en", options={"max_num_seqs": "8"}))
    with pytest.raises(EngineOptionError, match=r"max_num_seqs='many'.*not an integer"):
        create_engine("vllm", EngineConfig(model="tiny.en", options={"max_num_seqs": "many"}))
    with pytest.raises(EngineOptionError, match="'maybe' is not a boolean"):
        create_engine("faster-whisper", EngineConfig(model="tiny.en", options={"batched": "maybe"}))
    with pytest.raises(EngineOptionError, match="needs a value"):
        resolve_engine_options("x", {"n": EngineOption(int, 1, "n")}, {"n": "none"})
    assert create_engine("faster-whisper", EngineConfig(model="tiny.en", options={"batched": "1"})).options == {
        "batched": True
    }


def test_serve_refuses_an_unknown_option_before_loading(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli_main(["serve", "--engine", "transformers", "--engine-option", "beams=4", "--port", "0"]) == 2
    err = capsys.readouterr().err
    assert "engine 'transformers' has no option 'beams' (its options: attn_implementation)" in err


class OptionedEngine(ThreadedEngine):
    OPTIONS: ClassVar[Mapping[str, EngineOption]] = {
        "speed": EngineOption(float, 1.0, "how fast"),
        "mode": EngineOption(str, "plain", "which mode"),
    }

    def __init__(self, options: dict[str, str]) -> None:
        super().__init__()
        self.options = resolve_engine_options("optioned", self.OPTIONS, options)
        self.info = EngineInfo("optioned", "stand-in")

    def load(self) -> None:
        """Nothing to load."""

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        return [Transcription("") for _ in batch]


def test_info_reports_the_resolved_options() -> None:
    with inprocess_server(OptionedEngine({"speed": "2.5"})) as (url, _):
        info = httpx.get(f"{url}/v1/info").json()
    assert info["engine"]["options"] == {"speed": 2.5, "mode": "plain"}
    assert info["batching"]["scheduler"] == "micro-batches" and info["batching"]["max_batches_in_flight"] == 1


def test_verbose_start_up_prints_the_options_set_from_the_environment() -> None:
    with running_server(ready_timeout_s=120, verbose=True,
                        env={"AUDIO_REWARD_SERVER_ENGINE_OPTIONS": "batched=false"}) as server:
        assert httpx.get(f"{server.url}/v1/info").json()["engine"]["options"] == {"batched": False}
        log = server.log_path.read_text()
    assert "audio-reward serve: engine option batched = false\n" in log
    # the settings lines show what was given, and where from
    assert "audio-reward serve: engine_options.batched = false  (env AUDIO_REWARD_SERVER_ENGINE_OPTIONS)\n" in log


def test_the_documented_batched_command_serves_with_the_option() -> None:
    # docs/server.md: audio-reward serve --engine faster-whisper --engine-option batched=false
    with running_server(engine="faster-whisper", engine_option="batched=false") as server:
        assert httpx.get(f"{server.url}/v1/info").json()["engine"]["options"] == {"batched": False}
