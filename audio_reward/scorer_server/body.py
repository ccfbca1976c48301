"""Reading a request body with a size limit, before any parsing."""

from __future__ import annotations

from fastapi import Request

from .errors import BadRequestError, PayloadTooLargeError, UnsupportedMediaTypeError

# Besides JSON: what curl -d and generic HTTP clients send when no type is set; the body must still be JSON.
_GENERIC_TYPES = ("", "text/plain", "application/x-www-form-urlencoded")


async def read_body(request: Request, max_bytes: int) -> bytes:
    """The raw body, or 413 as soon as it is known to exceed ``max_bytes``.

    ``Content-Length`` is checked first; the stream is counted too, because a
    chunked upload announces no length.
    """
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise BadRequestError("invalid_request", "Content-Length is not an integer") from None
        if size > max_bytes:
            raise PayloadTooLargeError(f"request body of {size} bytes exceeds the limit of {max_bytes} bytes")
    chunks: list[bytes] = []
    received = 0
    async for chunk in request.stream():
        received += len(chunk)
        if received > max_bytes:
            raise PayloadTooLargeError(f"request body exceeds the limit of {max_bytes} bytes")
        chunks.append(chunk)
    if not received:
        raise BadRequestError("malformed_json", "request body is empty; send a JSON object")
    return b"".join(chunks)


async def require_json(request: Request) -> None:
    """FastAPI dependency: 415 with a hint for a body that is declared as something other than JSON."""
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type == "application/json" or content_type.endswith("+json") or content_type in _GENERIC_TYPES:
        return
    hint = "send the request as a JSON object with Content-Type: application/json (see /docs)"
    if content_type.startswith("multipart/"):
        hint += "; to upload an audio file, put it base64-encoded in audio_file_base64, or use the " \
                "OpenAI-compatible POST /v1/audio/transcriptions for transcripts"
    elif content_type.startswith("audio/"):
        hint += "; raw audio goes base64-encoded in audio_file_base64 (WAV or FLAC)"
    raise UnsupportedMediaTypeError(f"this endpoint takes JSON, not {content_type}: {hint}")
