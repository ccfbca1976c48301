"""ASGI middleware: request ids, request metrics, the access log and the last-resort 500.

A client that goes away before its body has arrived is no server error: it is
counted with status ``client_closed`` and logged at INFO, without a traceback.

Pure ASGI (no ``BaseHTTPMiddleware``), so bodies stream through untouched.
"""

from __future__ import annotations

import logging
import re
import time
import uuid

from fastapi import Request
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from ..errors import error_body
from ..logs import ACCESS_LOGGER
from ..service.prometheus import ServerMetrics
from .responses import OrjsonResponse

log = logging.getLogger(__name__)
access_log = logging.getLogger(ACCESS_LOGGER)
_ACCESS_FIELDS = ("client", "method", "path", "status", "latency_ms")
"""The access line's fields its message already says: the plain format does not repeat them, JSON keeps them."""

REQUEST_ID_HEADER = "x-request-id"
_VALID_ID = re.compile(r"^[A-Za-z0-9._:\-]{1,128}$")
_TIMED_PREFIXES = ("/score", "/v1/score", "/v1/audio/")
CLIENT_CLOSED = "client_closed"
"""The status label of requests whose client left before they could be answered."""
UNMATCHED = "unmatched"
"""The endpoint label of requests that reached no route (or were refused before their path was read)."""


def request_id_of(request: Request) -> str:
    """The id the middleware gave this request (the client's ``X-Request-ID`` when valid)."""
    return str(request.state.request_id)


class RequestContextMiddleware:
    """Gives each request an id, counts it by route and status, and turns a crash into a clean 500."""

    def __init__(self, app: ASGIApp, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        given = headers.get(REQUEST_ID_HEADER, "")
        request_id = given if _VALID_ID.match(given) else uuid.uuid4().hex
        scope.setdefault("state", {})["request_id"] = request_id
        status: int | str = 500
        started = False
        t0 = time.perf_counter()

        async def send_wrapper(message: Message) -> None:
            nonlocal status, started
            if message["type"] == "http.response.start":
                started = True
                status = int(message["status"])
                message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
            await send(message)

        timed = scope.get("path", "").startswith(_TIMED_PREFIXES)
        if timed:
            self.metrics.in_flight.inc()
        try:
            await self.app(scope, receive, send_wrapper)
        except ClientDisconnect:
            status = CLIENT_CLOSED
            log.info("client closed the connection before its request was read",
                     extra={"request_id": request_id, "path": scope.get("path")})
        except Exception:  # the last line of defence: log it, answer without a traceback
            log.exception("unhandled error", extra={"request_id": request_id, "path": scope.get("path")})
            status = 500
            if not started:
                body = error_body("internal_error", f"internal server error (request id {request_id})",
                                  retryable=True, request_id=request_id)
                response = OrjsonResponse(body, status_code=500, headers={REQUEST_ID_HEADER: request_id})
                await response(scope, receive, send)
        finally:
            if timed:
                self.metrics.in_flight.dec()
            endpoint = getattr(scope.get("route"), "path", None) or UNMATCHED
            self.metrics.requests.labels(endpoint, str(status)).inc()
            if endpoint.startswith(_TIMED_PREFIXES):
                self.metrics.request_latency.labels(endpoint).observe(time.perf_counter() - t0)
            if access_log.isEnabledFor(logging.INFO):
                _log_access(scope, status, time.perf_counter() - t0, request_id)


def _log_access(scope: Scope, status: int | str, seconds: float, request_id: str) -> None:
    """The access line of one request, as uvicorn writes its own plus the latency and the request id."""
    client = scope.get("client")
    where = f"{client[0]}:{client[1]}" if client else "-"
    path = scope.get("path", "")
    query = scope.get("query_string", b"")
    target = f"{path}?{query.decode('latin-1')}" if query else path
    method = scope.get("method", "")
    latency_ms = round(seconds * 1000, 1)
    access_log.info('%s - "%s %s HTTP/%s" %s %.1f ms', where, method, target, scope.get("http_version", "1.1"),
                    status, latency_ms, extra={
                        "request_id": request_id, "client": where, "method": method, "path": target,
                        "status": status, "latency_ms": latency_ms, "_said": _ACCESS_FIELDS})
