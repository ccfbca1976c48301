"""API-key check for the scoring and info endpoints (health endpoints stay open)."""

from __future__ import annotations

import hmac

from fastapi import Request

from ..errors import UnauthorizedError
from .deps import Parts


def _presented_key(request: Request) -> str | None:
    if auth := request.headers.get("authorization"):
        scheme, _, token = auth.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return token.strip()
    return request.headers.get("x-api-key")


async def require_api_key(request: Request, parts: Parts) -> None:
    """FastAPI dependency: 401 unless the request carries the configured key."""
    expected = parts.settings.api_key
    if expected is None:
        return
    presented = _presented_key(request)
    if presented is None:
        raise UnauthorizedError("an API key is required: send 'Authorization: Bearer <key>' or 'X-API-Key: <key>'")
    # Constant-time comparison, so response timing says nothing about the key.
    if not hmac.compare_digest(presented.encode(), expected.get_secret_value().encode()):
        raise UnauthorizedError("the API key is not valid")
