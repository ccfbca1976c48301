"""Pydantic models of protocol v1: the wire messages and every rule of their fields.

The request accepts verl-omni's audio scorer v1 fields unchanged and adds
optional extensions.  A request validates itself: its version, the receiver's
size limits (passed as validation context, ``model_validate(obj,
context={"limits": limits})``), the choice of one audio encoding and of one
speaker reference, and the sample-rate rules.  Decoding the audio is :mod:`audio_reward.protocol.validation`'s.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Annotated, Any, ClassVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    Strict,
    StrictBool,
    StrictInt,
    StrictStr,
    ValidationInfo,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from .errors import Refusal
from .reward import RewardOptions, RewardPolicy
from .version import SUPPORTED_VERSIONS, is_supported

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


def is_finite_scalar(value: Any) -> bool:
    """True for str, bool, int, None and finite floats: what a flat response may hold."""
    return value is None or isinstance(value, (str, bool, int)) or (isinstance(value, float) and math.isfinite(value))


def _finite_scalar(value: Any) -> Any:
    if is_finite_scalar(value):
        return value
    if isinstance(value, float):
        raise ValueError(f"must be a finite number, got {value}")
    raise ValueError(f"must be a JSON scalar (string, number, bool or null), got {type(value).__name__}")


Scalar = Annotated[
    Any,
    PlainValidator(_finite_scalar),
    WithJsonSchema({"type": ["string", "number", "boolean", "null"]}),
]
"""A JSON scalar; numbers must be finite."""

SpeakerReferenceId = Annotated[StrictStr, Field(pattern=r"^[0-9a-f]{64}$")]
"""The sha256 (hex) of a reference recording's decoded 16 kHz float32 samples."""

MIN_SAMPLE_RATE = 1_000
MAX_SAMPLE_RATE = 192_000
AUDIO_FIELDS = ("waveform_f32_base64", "waveform_pcm16_base64", "audio_file_base64")


@dataclass(frozen=True)
class Limits:
    """Bounds a receiver enforces on top of the schema; each field is a server setting of the same name."""

    max_audio_seconds: float = 60.0
    max_batch_items: int = 256
    max_prompt_chars: int = 10_000
    max_metadata_keys: int = 128
    max_metadata_key_chars: int = 256
    max_metadata_value_chars: int = 10_000
    max_audio_bytes: int = 64 * 2**20
    """Decoded float32 bytes (every channel) of one item."""
    max_batch_audio_bytes: int = 256 * 2**20
    """Decoded float32 bytes of every item of one batch together."""


DEFAULT_LIMITS = Limits()


def context_limits(info: ValidationInfo) -> Limits | None:
    """The receiver's limits in the validation context; None (a sender's model) checks no size."""
    return info.context.get("limits") if isinstance(info.context, dict) else None


def check_version(data: dict[str, Any], *, required: bool) -> None:
    """Refuse a missing (where ``required``) or unsupported ``protocol_version``."""
    version = data.get("protocol_version")
    if version is None and not required:
        return
    if "protocol_version" not in data:
        raise Refusal("missing_field", "required field 'protocol_version' is missing; send "
                      f"\"protocol_version\": \"{SUPPORTED_VERSIONS[-1]}\"", "protocol_version")
    if not is_supported(version):
        raise Refusal("unsupported_protocol_version",
                      f"protocol_version {version!r} is not supported; supported: {', '.join(SUPPORTED_VERSIONS)}",
                      "protocol_version")


class _Closed(BaseModel):
    """A message (or a part of an evaluation file, :mod:`.reports`) that refuses fields it does not declare."""

    model_config = ConfigDict(extra="forbid")


class _Envelope(_Closed):
    """A request object: checked to be an object with a supported version before its fields."""

    not_object: ClassVar[str] = "a score request must be a JSON object, got {}"
    version_required: ClassVar[bool] = True

    @model_validator(mode="before")
    @classmethod
    def _object_of_this_version(cls, data: Any, info: ValidationInfo) -> Any:
        if isinstance(data, BaseModel):  # a model built already (a sender's batch of items)
            return data
        if not isinstance(data, dict):
            raise Refusal("invalid_request", cls.not_object.format(type(data).__name__))
        check_version(data, required=cls.version_required)
        if (limits := context_limits(info)) is not None:
            cls._check_sizes(data, limits)
        return data

    @classmethod
    def _check_sizes(cls, data: dict[str, Any], limits: Limits) -> None:
        """The receiver's size limits on the raw object, before any field is validated."""


class _AudioFields(_Envelope):
    # Declared first, so a body dumped from a model starts with it (subclasses narrow it in place).
    protocol_version: StrictStr | None = None
    waveform_f32_base64: StrictStr | None = Field(
        None, description="Mono float32 little-endian samples, base64 (verl-omni v1)."
    )
    waveform_pcm16_base64: StrictStr | None = Field(
        None, description="Extension: mono signed 16-bit little-endian PCM, base64."
    )
    audio_file_base64: StrictStr | None = Field(
        None, description="Extension: a whole audio file, base64 (WAV, FLAC, MP3, OGG...; a scorer server also "
                          "takes what FFmpeg decodes: M4A, WebM); its header gives the sample rate."
    )
    num_samples: Annotated[StrictInt, Field(ge=0)] | None = Field(
        None, description="Must equal the decoded sample count when given."
    )
    sample_rate: Annotated[StrictInt, Field(ge=MIN_SAMPLE_RATE, le=MAX_SAMPLE_RATE)] | None = Field(
        None, description="Hz; required for raw sample encodings."
    )

    @property
    def audio_field(self) -> str:
        """The one audio encoding the request uses (validation guarantees there is one)."""
        return next(name for name in AUDIO_FIELDS if getattr(self, name) is not None)

    @model_validator(mode="after")
    def _one_audio_encoding(self, info: ValidationInfo) -> Any:
        present = [name for name in AUDIO_FIELDS if getattr(self, name) is not None]
        if len(present) != 1:
            raise Refusal("invalid_audio_encoding",
                          f"exactly one audio encoding is allowed, found {len(present)}: {', '.join(present)}"
                          if present else f"the audio is missing: send one of {', '.join(AUDIO_FIELDS)}")
        name = present[0]
        if name == "audio_file_base64":
            if self.sample_rate is not None:
                raise Refusal("invalid_sample_rate",
                              "sample_rate must be omitted with audio_file_base64 (the file header gives it)",
                              "sample_rate")
            return self
        if self.sample_rate is None:
            raise Refusal("missing_field", f"sample_rate is required with {name}", "sample_rate")
        if (limits := context_limits(info)) is not None:
            _check_samples_size(name, getattr(self, name), self.sample_rate, limits)
        return self


def _check_samples_size(name: str, text: str, rate: int, limits: Limits) -> None:
    """Refuse an oversized raw-samples payload from its base64 length, before decoding it."""
    approx_samples = len(text) * 3 // 4 // (4 if name == "waveform_f32_base64" else 2)
    if approx_samples / rate > limits.max_audio_seconds + 1:
        raise Refusal("audio_too_long", f"{name} holds about {approx_samples / rate:.1f} s of audio; the limit is "
                      f"{limits.max_audio_seconds:g} s (max_audio_seconds)", name)
    if approx_samples * 4 > limits.max_audio_bytes + 4:
        raise Refusal("audio_too_large", f"{name} decodes to about {approx_samples * 4} bytes of float32 samples; "
                      f"the limit is {limits.max_audio_bytes} bytes (max_audio_bytes)", name)


class _ScoreFields(_AudioFields):
    prompt: StrictStr = Field(..., description="The target text the speech should say.")
    metadata: dict[str, Scalar] = Field(
        default_factory=dict, description="Trainer extra_info: finite JSON scalars only."
    )
    request_id: Annotated[StrictStr, Field(min_length=1, max_length=128)] | None = Field(
        None, description="Extension: echoed in the response; stays the same across retries."
    )
    language: Annotated[StrictStr, Field(min_length=2, max_length=16)] | None = Field(
        None, description="Extension: language code of the target text (e.g. en, zh)."
    )
    reference_duration_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        None, description="Extension: expected duration of the speech, for the duration-ratio penalty."
    )
    reward: RewardOptions | None = Field(None, description="Extension: reward shaping options.")
    speaker_reference_id: SpeakerReferenceId | None = Field(
        None, description="Extension: a reference recording registered with POST /v1/speakers; "
                          "the answer gains speaker_similarity."
    )
    speaker_reference_audio_base64: StrictStr | None = Field(
        None, description="Extension: the reference recording inline, a whole WAV or FLAC file, base64 "
                          "(at least 1 s); the answer gains speaker_similarity."
    )
    measure_quality: StrictBool | None = Field(
        None, description="Extension: true asks for DNSMOS (the dnsmos_* fields) although the reward does not "
                          "weigh it (quality_weight > 0 asks by itself); needs a server with a quality model."
    )

    @classmethod
    def _check_sizes(cls, data: dict[str, Any], limits: Limits) -> None:
        """Prompt and metadata sizes, checked on the raw JSON before any other work."""
        prompt = data.get("prompt")
        if isinstance(prompt, str) and len(prompt) > limits.max_prompt_chars:
            raise Refusal("prompt_too_long", f"prompt holds {len(prompt)} characters; the limit is "
                          f"{limits.max_prompt_chars} (max_prompt_chars)", "prompt")
        metadata = data.get("metadata")
        if not isinstance(metadata, dict):
            return
        if len(metadata) > limits.max_metadata_keys:
            raise Refusal("metadata_too_large", f"metadata holds {len(metadata)} keys; the limit is "
                          f"{limits.max_metadata_keys} (max_metadata_keys)", "metadata")
        for key, value in metadata.items():
            if len(key) > limits.max_metadata_key_chars:
                raise Refusal("metadata_too_large", f"a metadata key holds {len(key)} characters; the limit is "
                              f"{limits.max_metadata_key_chars} (max_metadata_key_chars)", "metadata")
            if isinstance(value, str) and len(value) > limits.max_metadata_value_chars:
                raise Refusal("metadata_too_large", f"metadata[{key[:40]!r}] holds {len(value)} characters; the limit "
                              f"is {limits.max_metadata_value_chars} (max_metadata_value_chars)", "metadata")

    @field_validator("prompt")
    @classmethod
    def _prompt_is_unicode_text(cls, value: str) -> str:
        # JSON escapes can spell a lone surrogate ("\ud800"): not text, and no UTF-8 response can echo it.
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ValueError(
                f"prompt holds a lone surrogate at character {exc.start}: not valid Unicode text"
            ) from None
        return value

    @model_validator(mode="after")
    def _one_speaker_reference(self) -> Any:
        # A request shape rule, so it is refused before any audio is decoded, as the audio encodings are.
        if self.speaker_reference_id is not None and self.speaker_reference_audio_base64 is not None:
            raise Refusal("invalid_speaker_reference", "send either speaker_reference_id or "
                          "speaker_reference_audio_base64, not both", "speaker_reference_audio_base64")
        return self


class ScoreRequest(_ScoreFields):
    """One candidate to score: ``POST /score`` or ``POST /v1/score``."""

    protocol_version: StrictStr = Field(..., description='Major version, "1" (minor versions "1.x" accepted).')


class BatchItem(_ScoreFields):
    """A score request inside a batch; its version defaults to the batch's."""

    version_required: ClassVar[bool] = False


class BatchScoreRequest(_Envelope):
    """Several candidates in one call: ``POST /v1/score/batch``."""

    not_object: ClassVar[str] = "a batch request must be a JSON object"

    protocol_version: StrictStr
    items: list[BatchItem] = Field(..., min_length=1)

    @field_validator("items", mode="wrap")
    @classmethod
    def _items_apart(cls, value: Any, handler: Any, info: ValidationInfo) -> Any:
        # A receiver decodes each item on its own, so that one bad item fails alone: here it takes them unread.
        if isinstance(info.context, dict) and info.context.get("items_apart"):
            if not isinstance(value, list) or not value:
                raise ValueError("items must be a non-empty array")
            return value
        return handler(value)

    @model_validator(mode="after")
    def _items_within_limit(self, info: ValidationInfo) -> BatchScoreRequest:
        if (limits := context_limits(info)) is not None and len(self.items) > limits.max_batch_items:
            raise Refusal("batch_too_large", f"items holds {len(self.items)} requests; the limit is "
                          f"{limits.max_batch_items} (max_batch_items)", "items")
        return self


Number = Annotated[float, Strict(), Field(allow_inf_nan=False)]
"""A finite JSON number (an integer too); a string or bool is refused, as verl-omni's client refuses them."""
Rate = Annotated[Number, Field(ge=0)]
Count = Annotated[StrictInt, Field(ge=0)]


class ScoreResponse(BaseModel):
    """A flat result: ``score`` plus diagnostics, every value a JSON scalar.

    Every field a scorer server of this package sends is declared here, in the
    order it sends them; all but ``score`` are optional, since other protocol v1
    servers (verl-omni's reference scorer) send only a few.  Such a server may
    add diagnostics of its own: a reader checks that they are finite scalars and
    keeps them out of the model (``additionalProperties`` in the schema).
    """

    model_config = ConfigDict(
        extra="ignore",
        json_schema_extra={"additionalProperties": {"type": ["string", "number", "boolean", "null"]}},
    )

    score: Number = Field(..., description="The reward the trainer gets.")
    cer: Rate | None = Field(None, description="Character error rate of the normalised texts (before clipping).")
    wer: Rate | None = Field(None, description="Word error rate of the normalised texts.")
    error_rate: Rate | None = Field(None, description="The rate the reward formula read (reward_metric).")
    error_clipped: Rate | None = Field(None, description="error_rate clipped at the policy's error_clip.")
    ref_chars: Count | None = Field(None, description="Characters of the normalised reference.")
    ref_words: Count | None = Field(None, description="Words of the normalised reference.")
    char_edits: Count | None = Field(None, description="Character edits between the normalised texts.")
    word_edits: Count | None = Field(None, description="Word edits between the normalised texts.")
    transcript: StrictStr | None = Field(None, description="What the ASR model heard.")
    normalized_transcript: StrictStr | None = Field(None, description="The transcript after normalisation.")
    normalized_reference: StrictStr | None = Field(None, description="The prompt after normalisation.")
    normalizer: StrictStr | None = Field(None, description="The normaliser's name.")
    language: StrictStr | None = Field(
        None, description='The language the audio was decoded in ("" when neither asked for nor detected).')
    char_level: StrictBool | None = Field(None, description="Whether the Chinese (per-character) rules applied.")
    duration_s: Number | None = Field(None, description="Seconds of the audio.")
    expected_duration_s: Number | None = Field(None, description="Seconds the speech was expected to last.")
    expected_duration_source: StrictStr | None = Field(
        None, description='Where the expectation came from: "reference" (reference_duration_s) or "estimate".')
    duration_ratio: Number | None = Field(None, description="duration_s / expected_duration_s (0: unchecked).")
    duration_checked: StrictBool | None = Field(None, description="Whether the duration-ratio check ran.")
    reward_formula: StrictStr | None = Field(None, description="The formula that shaped the reward.")
    reward_metric: StrictStr | None = Field(None, description='The rate the formula read: "cer" or "wer".')
    reward_base: Number | None = Field(None, description="The formula's value before penalties.")
    penalty_empty: Number | None = Field(None, description="Subtracted for an empty transcript.")
    penalty_duration: Number | None = Field(None, description="Subtracted for a duration ratio out of range.")
    penalty_short_audio: Number | None = Field(None, description="Subtracted for audio shorter than the minimum.")
    penalty_repeat: Number | None = Field(None, description="Subtracted for repeated n-grams.")
    repeated_ngram_fraction: Number | None = Field(
        None, description="Fraction of the transcript's n-grams seen earlier in it.")
    empty_transcript: StrictBool | None = Field(None, description="Whether the normalised transcript is empty.")
    model: StrictStr | None = Field(None, description="The ASR model that transcribed the audio.")
    engine: StrictStr | None = Field(None, description="The engine that ran it.")
    protocol_version: StrictStr | None = None
    request_id: StrictStr | None = Field(None, description="The request's id, echoed.")
    reward_asr: Number | None = Field(
        None, description="With signals: the CER reward that speaker and quality share the score with.")
    speaker_similarity: Number | None = Field(
        None, description="Cosine of the speaker embeddings of the speech and the reference, -1..1."
    )
    speaker_reference_id: SpeakerReferenceId | None = Field(
        None, description="The id of the reference the similarity was measured against (an inline one's too).")
    reward_speaker: Number | None = Field(None, description="The speaker term, 0..1.")
    speaker_weight: Number | None = Field(None, description="The policy's weight of the speaker term.")
    speaker_floor_applied: StrictBool | None = Field(
        None, description="Whether the similarity fell below speaker_floor and zeroed the score.")
    dnsmos_ovrl: Number | None = Field(None, description="DNSMOS P.835 overall quality, 1..5.")
    dnsmos_sig: Number | None = Field(None, description="DNSMOS P.835 speech signal quality, 1..5.")
    dnsmos_bak: Number | None = Field(None, description="DNSMOS P.835 background quality, 1..5.")
    dnsmos_p808: Number | None = Field(None, description="DNSMOS P.808 overall quality, 1..5.")
    reward_quality: Number | None = Field(None, description="The quality term, 0..1.")
    quality_weight: Number | None = Field(None, description="The policy's weight of the quality term.")

    @model_validator(mode="before")
    @classmethod
    def _undeclared_are_finite_scalars(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key in data.keys() - _SCORE_RESPONSE_FIELDS:  # one set operation: the server sends none
                try:
                    _finite_scalar(data[key])
                except ValueError as exc:
                    raise ValueError(f"diagnostic {key!r} {exc}") from None
        return data


_SCORE_RESPONSE_FIELDS = frozenset(ScoreResponse.model_fields)


class ErrorDetail(BaseModel):
    """What went wrong: a stable code, a message naming the field, and whether a retry can succeed."""

    model_config = ConfigDict(extra="allow")

    code: StrictStr
    message: StrictStr
    retryable: StrictBool
    request_id: StrictStr | None = None
    path: StrictStr | None = Field(None, description="JSON path of the offending value, when known.")


class ErrorResponse(_Closed):
    """Every non-200 answer, and a failed item inside a batch."""

    error: ErrorDetail


class BatchScoreResponse(_Closed):
    """Results in request order; a failed item is an :class:`ErrorResponse`."""

    protocol_version: StrictStr
    results: list[ScoreResponse | ErrorResponse]


class SpeakerRequest(_AudioFields):
    """A reference recording to register: ``POST /v1/speakers``."""

    not_object: ClassVar[str] = "a speaker registration must be a JSON object"

    protocol_version: StrictStr = Field(..., description='Major version, "1".')


class SpeakerResponse(_Closed):
    """A registered reference: its id names it in score requests until the server evicts it (then 404)."""

    speaker_reference_id: SpeakerReferenceId
    protocol_version: StrictStr
    duration_s: FiniteFloat = Field(..., description="Seconds of the reference recording.")
    model: StrictStr = Field(..., description="The speaker model that embedded it.")
    ttl_s: FiniteFloat = Field(..., description="How long the server keeps it unused (it may evict it sooner).")


class EngineDescription(_Closed):
    """The ASR engine and model behind every score."""

    name: StrictStr = Field(..., description="The engine (faster-whisper, transformers, vllm, funasr...).")
    model_id: StrictStr
    weights_sha256: StrictStr | None = None
    device: StrictStr
    compute_type: StrictStr | None = None
    beam_size: StrictInt = Field(..., ge=1)
    extra: dict[str, StrictStr] = Field(default_factory=dict, description="What else the engine reports.")
    options: dict[str, Scalar] = Field(default_factory=dict, description="The engine's resolved --engine-option "
                                                                         "values, every key it knows.")


class LimitsDescription(_Closed):
    """The bounds the server enforces (each a server setting of the same name)."""

    max_audio_seconds: FiniteFloat
    max_body_bytes: StrictInt
    max_batch_items: StrictInt
    max_prompt_chars: StrictInt
    max_audio_bytes: StrictInt
    max_batch_audio_bytes: StrictInt
    max_queue: StrictInt
    request_timeout_s: FiniteFloat


class BatchingDescription(_Closed):
    """How utterances are batched; the scheduler's own keys appear once it has started."""

    engine_batches: StrictBool = Field(..., description="Whether the engine gains from batches.")
    engine_schedules_itself: StrictBool = Field(..., description="Whether the engine forms its own batches (vLLM).")
    scheduler: StrictStr | None = Field(None, description='"micro-batches" or "engine"; absent before start.')
    max_batch_size: StrictInt
    max_wait_ms: FiniteFloat
    max_batch_audio_s: FiniteFloat | None = Field(None, description="Micro-batches: most seconds of audio per call.")
    max_batches_in_flight: StrictInt | None = Field(None, description="Micro-batches: engine calls at once.")
    max_in_flight: StrictInt | None = Field(None, description="Engine scheduler: utterances inside the engine.")
    max_batch_size_setting: StrictInt = Field(..., description="The max_batch_size setting.")
    note: StrictStr | None = Field(..., description="Why the batch size differs from the setting, when it does.")


class ThroughputDescription(_Closed):
    """How fast the engine has transcribed, measured on the requests it served (a fresh server has measured none)."""

    audio_seconds_per_second: FiniteFloat | None = Field(
        ..., description="Audio seconds transcribed per wall second while the engine was busy (idle time left out): "
                         "its rate at the load it has seen. null until an engine call has finished.")
    audio_seconds: FiniteFloat = Field(..., ge=0, description="Audio seconds transcribed so far.")
    busy_seconds: FiniteFloat = Field(..., ge=0, description="Wall seconds with an engine call in flight.")
    utterances: StrictInt = Field(..., ge=0, description="Utterances transcribed so far.")


class SignalModelDescription(_Closed):
    """A speaker or quality model."""

    engine: StrictStr
    model_id: StrictStr
    device: StrictStr
    extra: dict[str, StrictStr] = Field(default_factory=dict)
    ready: StrictBool


class SpeakerReferencesDescription(_Closed):
    """The store of registered speaker references."""

    kept: StrictInt
    bytes: StrictInt
    max_count: StrictInt
    max_bytes: StrictInt
    ttl_s: FiniteFloat
    min_reference_s: FiniteFloat


class SignalsDescription(_Closed):
    """The signal models beside the transcription (null: that signal is off)."""

    speaker: SignalModelDescription | None
    quality: SignalModelDescription | None
    max_batch_size: StrictInt
    speaker_references: SpeakerReferencesDescription


class InfoResponse(_Closed):
    """``GET /v1/info``: what the server scores with, so results can be reproduced."""

    server_version: StrictStr
    protocol_version: StrictStr
    supported_protocol_versions: list[StrictStr]
    ready: StrictBool = Field(..., description="Whether the model is loaded and warmed up.")
    uptime_s: FiniteFloat
    engine: EngineDescription
    preset: StrictStr | None
    normalizer: StrictStr
    default_language: StrictStr | None
    reward: RewardPolicy = Field(..., description="The server's reward policy (a request's reward options "
                                                  "override it per request).")
    limits: LimitsDescription
    batching: BatchingDescription
    throughput: ThroughputDescription | None = Field(
        None, description="The engine's measured throughput (absent from servers before it was added).")
    signals: SignalsDescription | None = Field(..., description="null: no signal model is configured.")
    auth: StrictBool = Field(..., description="Whether requests need an API key.")
    endpoints: list[StrictStr] = Field(..., description="The paths the server serves.")


MESSAGES: dict[str, type[BaseModel]] = {
    "score_request": ScoreRequest,
    "score_response": ScoreResponse,
    "error": ErrorResponse,
    "batch_request": BatchScoreRequest,
    "batch_response": BatchScoreResponse,
    "speaker_request": SpeakerRequest,
    "speaker_response": SpeakerResponse,
    "info_response": InfoResponse,
}
"""Every wire message by its kind name (schema file names and ``validate --kind``)."""
