"""Pydantic models of protocol v1: the wire messages, nothing else.

The request accepts verl-omni's audio scorer v1 fields unchanged and adds
optional extensions.  Semantic audio checks (base64, lengths, finiteness,
limits) live in :mod:`audio_reward.protocol.validation`.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PlainValidator,
    StrictBool,
    StrictInt,
    StrictStr,
    WithJsonSchema,
    create_model,
    field_validator,
    model_validator,
)

from .reward import RewardOptions

FiniteFloat = Annotated[float, Field(allow_inf_nan=False)]


def _finite_scalar(value: Any) -> Any:
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
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


class _ScoreFields(BaseModel):
    model_config = ConfigDict(extra="forbid")

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
    prompt: StrictStr = Field(..., description="The target text the speech should say.")
    metadata: dict[str, Scalar] = Field(
        default_factory=dict, description="Trainer extra_info: finite JSON scalars only."
    )
    language: Annotated[StrictStr, Field(min_length=2, max_length=16)] | None = Field(
        None, description="Extension: language code of the target text (e.g. en, zh)."
    )
    request_id: Annotated[StrictStr, Field(min_length=1, max_length=128)] | None = Field(
        None, description="Extension: echoed in the response; stays the same across retries."
    )
    reward: RewardOptions | None = Field(None, description="Extension: reward shaping options.")
    reference_duration_s: Annotated[float, Field(gt=0, allow_inf_nan=False)] | None = Field(
        None, description="Extension: expected duration of the speech, for the duration-ratio penalty."
    )
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


class ScoreRequest(_ScoreFields):
    """One candidate to score: ``POST /score`` or ``POST /v1/score``."""

    protocol_version: StrictStr = Field(..., description='Major version, "1" (minor versions "1.x" accepted).')


class BatchItem(_ScoreFields):
    """A score request inside a batch; its version defaults to the batch's."""

    protocol_version: StrictStr | None = None


class BatchScoreRequest(BaseModel):
    """Several candidates in one call: ``POST /v1/score/batch``."""

    model_config = ConfigDict(extra="forbid")

    protocol_version: StrictStr
    items: list[BatchItem] = Field(..., min_length=1)


class ScoreResponse(BaseModel):
    """A flat result: ``score`` plus diagnostics, every value a JSON scalar."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={"additionalProperties": {"type": ["string", "number", "boolean", "null"]}},
    )

    score: FiniteFloat
    protocol_version: StrictStr | None = None
    request_id: StrictStr | None = None
    model: StrictStr | None = None
    reward_formula: StrictStr | None = None
    transcript: StrictStr | None = None
    normalized_transcript: StrictStr | None = None
    normalized_reference: StrictStr | None = None
    cer: FiniteFloat | None = None
    wer: FiniteFloat | None = None
    duration_s: FiniteFloat | None = None
    duration_ratio: FiniteFloat | None = None
    speaker_similarity: FiniteFloat | None = Field(
        None, description="Cosine of the speaker embeddings of the speech and the reference, -1..1."
    )
    dnsmos_ovrl: FiniteFloat | None = Field(None, description="DNSMOS P.835 overall quality, 1..5.")
    dnsmos_sig: FiniteFloat | None = Field(None, description="DNSMOS P.835 speech signal quality, 1..5.")
    dnsmos_bak: FiniteFloat | None = Field(None, description="DNSMOS P.835 background quality, 1..5.")
    dnsmos_p808: FiniteFloat | None = Field(None, description="DNSMOS P.808 overall quality, 1..5.")

    @model_validator(mode="after")
    def _extras_are_finite_scalars(self) -> ScoreResponse:
        for key, value in (self.model_extra or {}).items():
            try:
                _finite_scalar(value)
            except ValueError as exc:
                raise ValueError(f"diagnostic {key!r} {exc}") from None
        return self


class ErrorDetail(BaseModel):
    """What went wrong: a stable code, a message naming the field, and whether a retry can succeed."""

    model_config = ConfigDict(extra="allow")

    code: StrictStr
    message: StrictStr
    retryable: StrictBool
    request_id: StrictStr | None = None
    path: StrictStr | None = Field(None, description="JSON path of the offending value, when known.")


class ErrorResponse(BaseModel):
    """Every non-200 answer, and a failed item inside a batch."""

    model_config = ConfigDict(extra="forbid")

    error: ErrorDetail


class BatchScoreResponse(BaseModel):
    """Results in request order; a failed item is an :class:`ErrorResponse`."""

    model_config = ConfigDict(extra="forbid")

    protocol_version: StrictStr
    results: list[ScoreResponse | ErrorResponse]


SPEAKER_AUDIO_FIELDS = ("waveform_f32_base64", "waveform_pcm16_base64", "audio_file_base64", "num_samples",
                        "sample_rate")

if TYPE_CHECKING:
    # What type checkers see: the runtime model below (the score request's audio fields, declared once there).
    class SpeakerRequest(BaseModel):
        """A reference recording to register: ``POST /v1/speakers``."""

        protocol_version: StrictStr
        waveform_f32_base64: StrictStr | None = None
        waveform_pcm16_base64: StrictStr | None = None
        audio_file_base64: StrictStr | None = None
        num_samples: StrictInt | None = None
        sample_rate: StrictInt | None = None
else:
    SpeakerRequest = create_model(
        "SpeakerRequest",
        __config__=ConfigDict(extra="forbid"),
        __doc__="A reference recording to register: ``POST /v1/speakers``.",
        __module__=__name__,
        protocol_version=(StrictStr, Field(..., description='Major version, "1".')),
        **{name: (_ScoreFields.model_fields[name].annotation, _ScoreFields.model_fields[name])
           for name in SPEAKER_AUDIO_FIELDS},
    )


class SpeakerResponse(BaseModel):
    """A registered reference: its id names it in score requests until the server evicts it (then 404)."""

    model_config = ConfigDict(extra="forbid")

    speaker_reference_id: SpeakerReferenceId
    protocol_version: StrictStr
    duration_s: FiniteFloat = Field(..., description="Seconds of the reference recording.")
    model: StrictStr = Field(..., description="The speaker model that embedded it.")
    ttl_s: FiniteFloat = Field(..., description="How long the server keeps it unused (it may evict it sooner).")


MESSAGES: dict[str, type[BaseModel]] = {
    "score_request": ScoreRequest,
    "score_response": ScoreResponse,
    "error": ErrorResponse,
    "batch_request": BatchScoreRequest,
    "batch_response": BatchScoreResponse,
    "speaker_request": SpeakerRequest,
    "speaker_response": SpeakerResponse,
}
"""Every wire message by its kind name (schema file names and ``validate --kind``)."""
