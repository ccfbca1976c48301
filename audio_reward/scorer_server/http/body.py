"""Reading a request body with a size limit and a deadline, before any parsing."""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from typing import Any

from fastapi import Request
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException as StarletteHTTPException

from ..config import ServerConfig
from ..errors import (
    BadRequestError,
    BodyTimeoutError,
    PayloadTooLargeError,
    UnsupportedMediaTypeError,
)

MAX_FORM_FIELDS = 32
"""Most fields a multipart form may hold (the file part besides)."""

# Besides JSON: what curl -d and generic HTTP clients send when no type is set; the body must still be JSON.
_GENERIC_TYPES = ("", "text/plain", "application/x-www-form-urlencoded")


def _mib(n: int) -> str:
    return f"{n / 2**20:.1f} MiB ({n} bytes)"


def _too_large(size: int | None, max_bytes: int, max_audio_seconds: float | None) -> PayloadTooLargeError:
    """413 in the units a user knows: MiB for the body and, for audio, the seconds an utterance may last."""
    what = f"the request body of {_mib(size)}" if size is not None else "the request body"
    audio = (f"; audio is limited to {max_audio_seconds:g} s per utterance (max_audio_seconds), "
             "so send longer recordings in pieces") if max_audio_seconds is not None else ""
    return PayloadTooLargeError(f"{what} exceeds the limit of {_mib(max_bytes)} (max_body_bytes){audio}")


async def read_body(request: Request, settings: ServerConfig, *, audio: bool = True) -> bytes:
    """The raw body, or 413 as soon as it is known to exceed ``max_body_bytes``.

    ``Content-Length`` is checked first; the stream is counted too, because a
    chunked upload announces no length.  The whole body must arrive within
    ``body_timeout_s``, or the answer is 408 and the connection is closed: a client
    that sends a few bytes of a large body cannot hold a connection.  A client
    that goes away mid-body raises starlette's ``ClientDisconnect``.  A body that
    carries audio (``audio``) names ``max_audio_seconds`` in its 413, the limit a user knows.
    """
    max_bytes, timeout_s = settings.max_body_bytes, settings.body_timeout_s
    max_audio_seconds = settings.max_audio_seconds if audio else None
    if (declared := request.headers.get("content-length")) is not None:
        try:
            size = int(declared)
        except ValueError:
            raise BadRequestError("invalid_request", "Content-Length is not an integer") from None
        if size > max_bytes:
            raise _too_large(size, max_bytes, max_audio_seconds)
    try:
        # One deadline for the whole body: a timer on this task, no task or loop turn of its own.
        if sys.version_info >= (3, 11):
            async with asyncio.timeout(timeout_s):
                return await _read(request, max_bytes, max_audio_seconds)
        return await asyncio.wait_for(_read(request, max_bytes, max_audio_seconds), timeout_s)
    except asyncio.TimeoutError:
        raise BodyTimeoutError(
            f"the request body did not arrive within {timeout_s:g} s; the limit is body_timeout_s"
        ) from None


async def _read(request: Request, max_bytes: int, max_audio_seconds: float | None) -> bytes:
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > max_bytes:
            raise _too_large(None, max_bytes, max_audio_seconds)
        chunks.append(chunk)
    if not received:
        raise BadRequestError("malformed_json", "request body is empty; send a JSON object")
    return b"".join(chunks)


@contextlib.asynccontextmanager
async def parse_form(request: Request, body: bytes) -> AsyncIterator[FormData]:
    """The multipart form of a body already read (and size-checked), one file part at most; 400
    ``malformed_multipart`` if unreadable.

    The form is closed on leaving the block (its uploads are spooled files).
    """
    async def replay() -> dict[str, Any]:
        return {"type": "http.request", "body": body, "more_body": False}

    try:
        form = await Request(request.scope, replay).form(max_files=1, max_fields=MAX_FORM_FIELDS,
                                                         max_part_size=len(body) + 1)
    except StarletteHTTPException as exc:
        raise BadRequestError("malformed_multipart", f"the multipart body cannot be read: {exc.detail}") from None
    try:
        yield form
    finally:
        await form.close()


def is_multipart_form(request: Request) -> bool:
    """Whether the request declares a ``multipart/form-data`` body."""
    return request.headers.get("content-type", "").lower().startswith("multipart/form-data")


async def require_json_or_form(request: Request) -> None:
    """FastAPI dependency of ``/v1/score``: JSON, or a ``multipart/form-data`` upload (:mod:`.score_form`)."""
    if not is_multipart_form(request):
        await require_json(request)


async def require_json(request: Request) -> None:
    """FastAPI dependency: 415 with a hint for a body that is declared as something other than JSON."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json" or content_type.endswith("+json") or content_type in _GENERIC_TYPES:
        return
    hint = "send the request as a JSON object with Content-Type: application/json (see /docs)"
    if content_type.startswith("multipart/"):
        hint += "; to upload an audio file, send multipart/form-data to POST /v1/score (a 'file' part and a " \
                "'text' field), or put it base64-encoded in audio_file_base64"
    elif content_type.startswith("audio/"):
        hint += "; raw audio goes base64-encoded in audio_file_base64 (WAV, FLAC, MP3, OGG, M4A...)"
    raise UnsupportedMediaTypeError(f"this endpoint takes JSON, not {content_type}: {hint}")
