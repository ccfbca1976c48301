"""``POST /v1/score`` as a ``multipart/form-data`` upload: the audio file as it is, the text beside it.

Scoring a file with curl in JSON means base64 inside the body, which a shell line cannot hold for
more than a few seconds of audio ("Argument list too long").  The form takes what the OpenAI
route takes, ``curl -F file=@speech.wav -F text="..."``, and becomes the protocol's JSON request
(``audio_file_base64`` holding the file), so validation, limits and error codes are those of a
JSON request.  Form fields are the request's fields by their protocol names; ``text`` is the
``prompt`` (as in the OpenAI route, ``prompt`` is accepted too).  String fields are taken as sent,
the others (``reference_duration_s``, ``measure_quality``, ``reward``, ``metadata``) as JSON values.
"""

from __future__ import annotations

import base64
import json
from typing import Any

from fastapi import Request
from starlette.datastructures import UploadFile

from audio_reward.protocol import PROTOCOL_VERSION, ScoreRequest
from audio_reward.protocol.models import AUDIO_FIELDS

from ..errors import BadRequestError
from .body import parse_form

FILE_FIELD = "file"
TEXT_FIELDS = ("text", "prompt")
ENCODED = frozenset({*AUDIO_FIELDS, "num_samples", "sample_rate", "prompt", "speaker_reference_audio_base64"})
"""Request fields the form does not take as fields: the audio is the file part, the prompt is ``text``."""
FORM_FIELDS = frozenset(ScoreRequest.model_fields) - ENCODED


def _json_types(prop: dict[str, Any]) -> set[str]:
    """The JSON types a property of the request's schema admits, ``null`` included."""
    return {t for part in prop.get("anyOf", [prop]) for t in
            ([part["type"]] if isinstance(part.get("type"), str) else part.get("type", []))}


STRING_FIELDS = frozenset(name for name, prop in ScoreRequest.model_json_schema()["properties"].items()
                          if name in FORM_FIELDS and _json_types(prop) - {"null"} == {"string"})
"""Form fields taken as sent, the request's string fields; every other field is read as a JSON value."""


def _value(name: str, raw: str) -> Any:
    if name in STRING_FIELDS:
        return raw
    try:
        return json.loads(raw)
    except json.JSONDecodeError:
        raise BadRequestError("invalid_request", f"form field {name!r} must be a JSON value, got {raw!r}",
                              path=name) from None


def _fields(form: Any) -> dict[str, Any]:
    """The request's fields from the form's text fields; 400 naming an unknown or misplaced one."""
    out: dict[str, Any] = {}
    for name, raw in form.multi_items():
        if name == FILE_FIELD or name in TEXT_FIELDS:
            continue
        if isinstance(raw, UploadFile):
            raise BadRequestError("unknown_field", f"the form part {name!r} is a file; only 'file' holds the audio",
                                  path=name)
        if name not in FORM_FIELDS:
            taken = ", ".join(sorted({FILE_FIELD, TEXT_FIELDS[0], *FORM_FIELDS}))
            raise BadRequestError("unknown_field", f"the form field {name!r} is not known; the form takes {taken}",
                                  path=name)
        out[name] = _value(name, raw)
    return out


def _text(form: Any) -> str:
    for name in TEXT_FIELDS:
        if isinstance(value := form.get(name), str):
            return value
    raise BadRequestError("missing_field", "the form has no 'text' field: the text the speech should say",
                          path="text")


async def form_score_body(request: Request, body: bytes) -> bytes:
    """The JSON score request a ``multipart/form-data`` body stands for (the file in ``audio_file_base64``)."""
    async with parse_form(request, body) as form:
        upload = form.get(FILE_FIELD)
        if not isinstance(upload, UploadFile):
            raise BadRequestError("missing_field", "the form has no 'file' part: attach the audio file as 'file' "
                                  "(curl -F file=@speech.wav)", path=FILE_FIELD)
        request_body = {"protocol_version": PROTOCOL_VERSION, **_fields(form), "prompt": _text(form),
                        "audio_file_base64": base64.b64encode(await upload.read()).decode("ascii")}
    return json.dumps(request_body).encode("utf-8")


def score_body() -> dict[str, Any]:
    """``openapi_extra`` of ``/v1/score``: the JSON request, or the same as a multipart form."""
    described = {name: field.description or "" for name, field in ScoreRequest.model_fields.items()}
    form_fields: dict[str, Any] = {
        FILE_FIELD: {"type": "string", "format": "binary", "description": described["audio_file_base64"]},
        TEXT_FIELDS[0]: {"type": "string", "description": described["prompt"]},
    }
    for name in sorted(FORM_FIELDS):
        kind = "a string" if name in STRING_FIELDS else "a JSON value"
        form_fields[name] = {"type": "string", "description": f"{described[name]} (as {kind})"}
    return {"requestBody": {"required": True, "content": {
        "application/json": {"schema": {"$ref": "#/components/schemas/ScoreRequest"}},
        "multipart/form-data": {"schema": {"type": "object", "required": [FILE_FIELD, TEXT_FIELDS[0]],
                                           "properties": form_fields}},
    }}}
