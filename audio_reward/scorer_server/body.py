"""Reading a request body with a size limit, before any parsing."""

from __future__ import annotations

from fastapi import Request

from .errors import BadRequestError, PayloadTooLargeError


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
