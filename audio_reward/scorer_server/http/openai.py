"""OpenAI-compatible routes: ``POST /v1/audio/transcriptions``, ``GET /v1/models``.

Same auth, limits and metrics as ``/v1/score``; every error on these routes,
auth and body-size errors included, takes OpenAI's shape
(``{"error": {"message", "type", "param", "code"}}``, rendered by the
handlers of :mod:`.errors`), so OpenAI clients raise their usual exceptions.  The body is read raw with the size limit
(after the API key is checked) and only then parsed as multipart.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request, Response
from fastapi.responses import PlainTextResponse
from pydantic import ValidationError
from starlette.datastructures import UploadFile

from ..errors import BadRequestError, ServerError, UnsupportedMediaTypeError
from ..openai_protocol import (
    UNSUPPORTED_FIELDS,
    ModelCard,
    ModelList,
    OpenAIErrorResponse,
    TranscriptionForm,
    TranscriptionResponse,
    TranscriptionVerboseResponse,
)
from ..service.transcription import render
from .auth import require_api_key
from .body import is_multipart_form, parse_form, read_body
from .deps import Parts
from .middleware import request_id_of
from .responses import OrjsonResponse, error_responses

router = APIRouter(tags=["openai"], dependencies=[Depends(require_api_key)])

# OpenAI's error shape; the statuses whose meaning differs here say so, the others read as on the protocol's routes.
_ERRORS = error_responses(400, 401, 404, 413, 415, 429, 500, 503, 504, model=OpenAIErrorResponse, text={
    400: "Bad form field or audio (param names the field).",
    404: "The model is not served here.",
    415: "Not a multipart/form-data body.",
    500: "Engine error; never a traceback.",
    503: "Model loading or shutting down; retry after Retry-After seconds.",
})


def _form_fields(form: Any) -> dict[str, str]:
    return {name: value for name in TranscriptionForm.model_fields if isinstance(value := form.get(name), str)}


def _form_error(exc: ValidationError) -> ServerError:
    err = exc.errors(include_url=False)[0]
    param = ".".join(str(p) for p in err.get("loc", ())) or None
    if err["type"] == "missing":
        return BadRequestError("missing_field", f"the form field {param!r} is required", path=param)
    return BadRequestError("invalid_request", f"form field {param!r}: {err['msg']}", path=param)


async def _parse_upload(request: Request, body: bytes) -> tuple[TranscriptionForm, bytes, str | None]:
    if not is_multipart_form(request):
        shown = request.headers.get("content-type", "").split(";")[0] or "no Content-Type"
        raise UnsupportedMediaTypeError(
            f"{shown} is not accepted here: send multipart/form-data with the audio in a 'file' part and a "
            "'model' field, as OpenAI clients do (curl -F file=@speech.wav -F model=...)")

    # The body was read (and size-checked) already; the multipart parser reads it from memory.
    async with parse_form(request, body) as form:
        for name in form:
            if (reason := UNSUPPORTED_FIELDS.get(name.removesuffix("[]"))) is not None:
                raise BadRequestError("unsupported_field", f"the form field {name!r} is not supported: {reason}",
                                      path=name)
        upload = form.get("file")
        if not isinstance(upload, UploadFile):
            raise BadRequestError("missing_field", "the form has no 'file' part: attach the audio file as 'file'",
                                  path="file")
        try:
            fields = TranscriptionForm.model_validate(_form_fields(form))
        except ValidationError as exc:
            raise _form_error(exc) from None
        return fields, await upload.read(), upload.filename


@router.post(
    "/v1/audio/transcriptions",
    summary="Transcribe an audio file (OpenAI-compatible)",
    response_model=TranscriptionResponse | TranscriptionVerboseResponse,
    responses={200: {"content": {"text/plain": {"schema": {"type": "string"}}},
                     "description": "The transcript: JSON, verbose JSON or plain text by response_format."},
               **_ERRORS},
    openapi_extra={"requestBody": {"required": True, "content": {"multipart/form-data": {
        "schema": {"$ref": "#/components/schemas/TranscriptionUploadDoc"}}}}},
)
async def create_transcription(request: Request, parts: Parts) -> Response:
    """What OpenAI's ``audio.transcriptions.create`` and ``vllm serve`` answer, on this server's engine."""
    form, raw, filename = await _parse_upload(request, await read_body(request, parts.settings))
    result = await parts.transcriptions.transcribe(form, raw, filename, request_id_of(request))
    content = render(result, form.response_format)
    return PlainTextResponse(content) if isinstance(content, str) else OrjsonResponse(content)


@router.get("/v1/models", summary="Served models (OpenAI-compatible)", response_model=ModelList,
            responses={401: _ERRORS[401]})
async def list_models(parts: Parts) -> OrjsonResponse:
    """The model ids ``/v1/audio/transcriptions`` accepts."""
    return OrjsonResponse(parts.transcriptions.models().model_dump())


@router.get("/v1/models/{model_id:path}", summary="One served model (OpenAI-compatible)", response_model=ModelCard,
            responses={401: _ERRORS[401], 404: _ERRORS[404]})
async def retrieve_model(model_id: str, parts: Parts) -> OrjsonResponse:
    return OrjsonResponse(parts.transcriptions.model_card(model_id).model_dump())
