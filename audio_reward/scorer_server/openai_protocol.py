"""Wire models of the OpenAI-compatible audio API (``/v1/audio/transcriptions``, ``/v1/models``).

Field names and response shapes follow OpenAI's audio API, so its SDK and
tools written against ``vllm serve`` work unchanged.  Only what this server
can honour is accepted: ``response_format`` is ``json``, ``text`` or
``verbose_json``; ``temperature`` must be 0 (decoding is greedy, without
fallback, so a transcript is reproducible).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, Field

ResponseFormat = Literal["json", "text", "verbose_json"]

# Paths whose every error, unknown paths and methods included, takes OpenAI's error shape.
OPENAI_PATH_PREFIXES = ("/v1/audio/", "/v1/models")

# OpenAI form fields this server cannot honour: refused by name rather than silently dropped.
UNSUPPORTED_FIELDS = {
    "timestamp_granularities": "word and segment timings are not produced: decoding runs without timestamps",
    "include": "extra outputs such as logprobs are not produced",
    "chunking_strategy": "the whole file is transcribed in one pass; no chunking options are offered",
}

PROMPT_NOTE = (
    "Accepted for compatibility and not used: decoding is never conditioned on text, "
    "so a transcript does not depend on the prompt."
)
TEMPERATURE_NOTE = (
    "Only 0 is honoured (greedy decoding without temperature fallback); any other value is refused with a 400."
)


class TranscriptionForm(BaseModel):
    """The multipart form fields of ``POST /v1/audio/transcriptions`` (``file`` is the upload)."""

    model: Annotated[str, Field(min_length=1, max_length=256)] = Field(
        ..., description="A model id from GET /v1/models."
    )
    language: Annotated[str, Field(min_length=2, max_length=16)] | None = Field(
        None, description="ISO-639-1 code of the speech (en, zh, ...); detected when omitted."
    )
    prompt: str | None = Field(None, description=PROMPT_NOTE)
    response_format: ResponseFormat = Field("json", description="json, text or verbose_json.")
    temperature: float = Field(0.0, description=TEMPERATURE_NOTE)
    stream: bool = Field(False, description="Streaming is not offered: true is refused with a 400.")


class TranscriptionUploadDoc(TranscriptionForm):
    """OpenAPI only: the form with its file part (the route parses the body itself)."""

    file: bytes = Field(
        ..., description="The audio file: WAV, FLAC, MP3, OGG, M4A, WebM or any format FFmpeg decodes.",
        json_schema_extra={"format": "binary"},
    )


class DurationUsage(BaseModel):
    type: Literal["duration"] = "duration"
    seconds: float = Field(..., description="Duration of the input audio in seconds.")


class TranscriptionResponse(BaseModel):
    """``response_format=json``."""

    text: str
    usage: DurationUsage


class TranscriptionVerboseResponse(BaseModel):
    """``response_format=verbose_json``: no segments or word timings (decoding runs without timestamps)."""

    task: Literal["transcribe"] = "transcribe"
    language: str = Field(..., description="Language code the model decoded (forced or detected).")
    duration: float = Field(..., description="Duration of the input audio in seconds.")
    text: str
    usage: DurationUsage


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "audio-reward"
    root: str = Field(..., description="The model the engine loaded, which this id serves: an alias set with "
                                       "--served-model-name names the real model here (vLLM's /v1/models does "
                                       "the same).")
    parent: str | None = Field(None, description="Always null: no fine-tuned models are served (as vLLM's field).")


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class OpenAIErrorDetail(BaseModel):
    message: str
    type: str = Field(..., description="invalid_request_error, authentication_error, rate_limit_error or server_error.")
    param: str | None = Field(None, description="The form field at fault, when one is.")
    code: str | None = Field(None, description="The server's stable error code (the same codes as /v1/score).")


class OpenAIErrorResponse(BaseModel):
    """Every non-200 answer of the OpenAI-compatible routes."""

    error: OpenAIErrorDetail
