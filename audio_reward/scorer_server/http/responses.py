"""JSON responses rendered with orjson, and the OpenAPI entries shared by routes."""

from __future__ import annotations

from typing import Any

import orjson
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from audio_reward.protocol import BatchScoreResponse, ErrorResponse, ScoreResponse


def wire_json(content: Any) -> bytes:
    """``content`` as JSON bytes; a protocol model as the fields the server set, in their declared order.

    ``model_dump`` + orjson rather than pydantic's own JSON: the bytes stay those the dict answers had
    (orjson's number and string forms).  bench/protocol_codec.py measures the model's cost against a dict.
    """
    if isinstance(content, BaseModel):
        content = content.model_dump(exclude_unset=True)
    return orjson.dumps(content)


def score_json(answer: ScoreResponse | BatchScoreResponse) -> bytes:
    """A score answer as JSON bytes: its fields in their declared order, a None one not sent (nothing measured it)."""
    return orjson.dumps(answer.model_dump(exclude_none=True))


class OrjsonResponse(JSONResponse):
    def render(self, content: Any) -> bytes:
        return wire_json(content)


def score_response(answer: ScoreResponse | BatchScoreResponse, body: bytes | None = None) -> Response:
    """A 200 score answer (``body``: already encoded)."""
    return Response(score_json(answer) if body is None else body, media_type=OrjsonResponse.media_type)


async def encode_off_loop(answer: BatchScoreResponse) -> Response:
    """A 200 score answer encoded in a worker thread, for answers big enough to stall the event loop."""
    return score_response(answer, await run_in_threadpool(score_json, answer))


_ERROR_TEXT = {
    400: "Protocol error (code names the problem, path the field).",
    401: "Missing or invalid API key.",
    408: "The body did not arrive within body_timeout_s; the connection is closed.",
    413: "Request body larger than max_body_bytes.",
    415: "Body declared as something other than JSON (multipart, audio, ...); the message says what to send.",
    429: "Queue full; retry after Retry-After seconds.",
    500: "Internal or engine error; never a traceback.",
    503: "Model not loaded yet, or shutting down; retry after Retry-After seconds.",
    504: "Request took longer than request_timeout_s.",
}
"""What each error status means, in the OpenAPI document."""


def error_responses(*statuses: int, model: type[BaseModel] = ErrorResponse,
                    text: dict[int, str] | None = None) -> dict[int | str, dict[str, Any]]:
    """OpenAPI ``responses`` entries: each listed status answers a ``model`` (the protocol's :class:`ErrorResponse`),
    described by ``text`` where it says, else by :data:`_ERROR_TEXT`."""
    described = {**_ERROR_TEXT, **(text or {})}
    return {s: {"model": model, "description": described.get(s, "Error.")} for s in statuses}


def json_body(schema_name: str) -> dict[str, Any]:
    """``openapi_extra`` documenting a raw-read JSON body by its component schema."""
    return {
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{schema_name}"}}},
        }
    }
