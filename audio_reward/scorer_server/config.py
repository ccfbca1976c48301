"""The scorer server's configuration as a plain typed model: every field, its bounds and help.

:class:`ServerConfig` reads no environment: it is what a Ray Serve replica
receives from its driver (already validated there, so a replica never reads
its own machine's environment) and what the command line's flags are
generated from.  :class:`~.settings.ServerSettings` adds the environment on
top.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator, model_validator

from audio_reward.environment import masked
from audio_reward.protocol import Limits, RewardPolicy
from audio_reward.scoring.normalizers import DEFAULT_NORMALIZER

from .presets import get_preset
from .signals.base import QualityWindows

ENV_PREFIX = "AUDIO_REWARD_SERVER_"
"""Every server setting's variable starts with this (``AUDIO_REWARD_SERVER_MAX_QUEUE``)."""

_LIMITS = Limits()  # the protocol package owns the request-size defaults

PRESET_FIELDS = ("engine", "model", "normalizer", "language", "beam_size")
"""Settings a preset fixes, by the preset's attribute name."""


def parse_engine_options(pairs: Any) -> dict[str, str]:
    """``["KEY=VALUE", ...]`` -> ``{KEY: VALUE}``; the engine converts and checks each value."""
    out: dict[str, str] = {}
    for pair in pairs:
        key, sep, value = str(pair).partition("=")
        if not sep or not key.strip():
            raise ValueError(f"engine option {pair!r} is not KEY=VALUE")
        out[key.strip()] = value.strip()
    return out


class ServerConfig(BaseModel):
    """Every knob of ``audio-reward serve``; see docs/server.md for each one."""

    model_config = ConfigDict(extra="forbid", validate_default=True)

    # network
    host: str = Field("127.0.0.1", description="Interface to bind; 0.0.0.0 to serve other machines.")
    port: int = Field(8000, ge=0, le=65535, description="TCP port (0 picks a free one).")

    # model
    preset: str | None = Field(None, description="Named preset fixing engine, model, normalizer, language, beam size.")
    engine: str = Field("faster-whisper", description="ASR engine: faster-whisper, transformers, vllm or funasr.")
    model: str = Field("tiny.en", description="Model name (tiny.en, base), CTranslate2 folder or hub id.")
    device: str = Field(
        "auto", description="cpu, cuda (cuda:N) or auto: cuda when the engine's library (CTranslate2, torch) sees a "
                            "GPU, else cpu; the start-up line says which.")
    compute_type: str = Field("default", description="CTranslate2 compute type (default, int8, float16, ...).")
    cpu_threads: int = Field(0, ge=0, description="Engine intra-op threads; 0 lets the engine choose.")
    numpy_threads: int = Field(
        1, ge=0, description="Threads of numpy's BLAS (the feature arithmetic around the models) in the server "
                             "process; 0 leaves its default, one per core, whose idle threads spin on the cores "
                             "the models need.")
    beam_size: int = Field(1, ge=1, le=16, description="1 is greedy decoding.")
    engine_options: dict[str, Any] = Field(
        default_factory=dict,
        description="Engine-specific options (--engine-option KEY=VALUE; env: JSON object or KEY=VALUE,KEY=VALUE).")
    served_model_name: tuple[str, ...] | None = Field(
        None,
        description="Model id(s) of the OpenAI-compatible API (/v1/models lists them all, a request may name any; "
                    "the first is the main one); default: the model's own id. "
                    "Env: comma separated or a JSON list.")

    # batching and limits
    max_batch_size: int = Field(16, ge=1, le=1024, description="Most utterances in one engine call.")
    max_wait_ms: float = Field(
        10.0, ge=0, le=10_000,
        description="How long an idle engine waits for requests still arriving to join its batch.")
    max_batch_audio_s: float | None = Field(
        None, gt=0, description="Most seconds of audio in one engine batch (unset: no bound).")
    max_batches_in_flight: int | None = Field(
        None, ge=1, le=16,
        description="Engine batches taken at once (next one's features overlap); unset: 2 on GPU, 1 on CPU.")
    max_queue: int = Field(512, ge=1, description="Utterances waiting for the engine before new ones get 429.")
    max_audio_seconds: float = Field(60.0, gt=0, le=3600, description="Longest accepted utterance.")
    max_body_bytes: int = Field(64 * 1024 * 1024, ge=1024, description="Largest accepted request body.")
    max_batch_items: int = Field(256, ge=1, description="Most items in one /v1/score/batch request.")
    request_timeout_s: float = Field(120.0, gt=0, description="A request still waiting after this gets 504.")
    early_refusal: bool = Field(
        True, description="429 at admission for a request the measured throughput cannot finish within "
                          "request_timeout_s, instead of a 504 when the timeout passes.")
    shutdown_grace_s: float = Field(30.0, ge=0, description="Time given to requests in flight on SIGTERM.")
    dedup_cache_size: int = Field(4096, ge=0, description="Answers kept by request id for retries; 0 turns this off.")
    dedup_ttl_s: float = Field(
        600.0, gt=0, description="How long a retry with the same request id gets the kept answer.")
    dedup_cache_bytes: int = Field(16 * 2**20, ge=0, description="Bytes the kept transcripts may take together.")

    # request sizes (docs/reliability.md)
    max_prompt_chars: int = Field(_LIMITS.max_prompt_chars, ge=1, description="Longest accepted prompt, in characters.")
    max_metadata_keys: int = Field(_LIMITS.max_metadata_keys, ge=0, description="Most metadata keys per request.")
    max_metadata_key_chars: int = Field(_LIMITS.max_metadata_key_chars, ge=1, description="Longest metadata key.")
    max_metadata_value_chars: int = Field(
        _LIMITS.max_metadata_value_chars, ge=1, description="Longest metadata string value.")
    max_audio_bytes: int = Field(
        _LIMITS.max_audio_bytes, ge=1024,
        description="Decoded float32 bytes (all channels) of one item, checked from its header before decoding.")
    max_batch_audio_bytes: int = Field(
        _LIMITS.max_batch_audio_bytes, ge=1024, description="Decoded float32 bytes of all items of one batch together.")

    # HTTP connections (docs/reliability.md)
    max_header_bytes: int = Field(64 * 1024, ge=1024, description="Largest request line plus headers; more gets 431.")
    header_timeout_s: float = Field(
        10.0, gt=0, description="Time a connection has to send a request's headers; then 408 and close.")
    body_timeout_s: float = Field(
        60.0, gt=0, description="Time a request has to send its whole body; then 408 and close.")
    keep_alive_timeout_s: float = Field(5.0, gt=0, description="An idle keep-alive connection is closed after this.")
    max_connections: int | None = Field(
        None, ge=1,
        description=(
            "New requests get 503 once this many connections (theirs included) or requests in flight are "
            "open; unset is no limit."
        ))

    # auth
    api_key: SecretStr | None = Field(None, description="Required key (Bearer or X-API-Key); unset disables auth.")
    api_key_file: Path | None = Field(None, description="File holding the API key (first line).")

    # scoring
    normalizer: str = Field(DEFAULT_NORMALIZER, description="Text normalizer applied to both texts before CER/WER.")
    language: str | None = Field(None, description="Default language when a request names none.")
    reward: RewardPolicy = Field(RewardPolicy(),  # frozen: one shared default is safe
                                 description="Reward policy every request starts from (docs/scoring.md).")

    # signals beside the ASR (docs/signals.md)
    speaker_model: str = Field(
        "none", description="Speaker similarity: resemblyzer (offline, the signals extra), a WavLMForXVector "
                            "folder or hub id, or none.")
    quality_model: Literal["dnsmos", "none"] = Field(
        "none", description="Speech quality: dnsmos (offline, the signals extra) or none.")
    quality_windows: QualityWindows = Field(
        "auto", description="How DNSMOS runs a clip's 9 s windows: shared (their convolutions once over the clip, "
                            "checked against the whole model on the CPU), whole (the whole model per window, as "
                            "speechmos) or auto (shared on the CPU, whole on CUDA).")
    signal_device: str = Field("cpu", description="Where the speaker and quality models run: cpu, cuda or auto.")
    signal_threads: int = Field(
        0, ge=0, description="CPU threads of the signal models; 0 leaves their libraries' default.")
    signal_max_batch_size: int = Field(32, ge=1, le=1024, description="Most utterances in one signal model call.")
    speaker_reference_count: int = Field(
        4096, ge=0, description="Registered speaker references kept (least recently used go first).")
    speaker_reference_bytes: int = Field(
        16 * 2**20, ge=0, description="Bytes the kept speaker reference embeddings may take together.")
    speaker_reference_ttl_s: float = Field(
        3600.0, gt=0, description="A speaker reference unused this long is evicted (then 404: register it again).")

    # logging
    log_level: str = Field("warning", description="debug, info, warning or error.")
    log_json: bool = Field(False, description="One JSON object per log line.")
    access_log: bool | None = Field(
        None, description="One log line per request: method, path, status, latency and request id (as uvicorn's "
                          "--access-log / --no-access-log); unset: on at log level debug only.")

    @field_validator("engine_options", mode="before")
    @classmethod
    def _parse_engine_options(cls, value: Any) -> Any:
        if not isinstance(value, str):
            return value
        text = value.strip()
        return json.loads(text) if text.startswith("{") else parse_engine_options(
            part for part in text.split(",") if part.strip())

    @field_validator("served_model_name", mode="before")
    @classmethod
    def _split_names(cls, value: Any) -> Any:
        if isinstance(value, str):  # one name, or the environment's "a,b" / '["a", "b"]'
            text = value.strip()
            value = json.loads(text) if text.startswith("[") else text.split(",")
        return value

    @field_validator("served_model_name")
    @classmethod
    def _check_names(cls, value: tuple[str, ...] | None) -> tuple[str, ...] | None:
        if value is None:
            return None
        names = tuple(dict.fromkeys(name.strip() for name in value))
        if not names or any(not name for name in names):
            raise ValueError("served_model_name needs non-empty names")
        return names

    @model_validator(mode="before")
    @classmethod
    def _apply_preset(cls, data: Any) -> Any:
        if isinstance(data, dict) and data.get("preset"):
            preset = get_preset(str(data["preset"]))
            data = dict(data)
            for name in PRESET_FIELDS:
                if data.get(name) is None:
                    data[name] = getattr(preset, name)
            if data.get("model") == preset.model:  # the engine may need the checkpoint in another format
                data["model"] = preset.model_for(str(data["engine"]))
        return data

    @model_validator(mode="after")
    def _read_key_file(self) -> ServerConfig:
        if self.api_key_file is not None:  # an explicit file beats a key from the environment
            try:
                key = self.api_key_file.read_text(encoding="utf-8").splitlines()[0].strip()
            except (OSError, IndexError) as exc:
                raise ValueError(f"cannot read an API key from {self.api_key_file}: {exc}") from None
            if not key:
                raise ValueError(f"{self.api_key_file} holds an empty API key")
            self.api_key = SecretStr(key)
        return self

    @property
    def access_log_on(self) -> bool:
        """Whether the access log writes its lines: as set, else only at log level debug."""
        return self.access_log if self.access_log is not None else self.log_level.lower() == "debug"

    @property
    def limits(self) -> Limits:
        """The protocol's request-size limits these settings name."""
        return Limits(**{f.name: getattr(self, f.name) for f in dataclasses.fields(Limits)})

    def describe(self) -> dict[str, Any]:
        """Every setting as printed at start-up; the key shows only whether it is set."""
        return {**self.model_dump(mode="json", exclude={"api_key"}), "api_key": masked(self.api_key)}
