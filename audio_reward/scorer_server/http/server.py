"""The scorer's uvicorn configuration, with limits on how a client may send a request.

uvicorn offers knobs for idle keep-alive connections (``timeout_keep_alive``)
and for a cap on connections and requests in flight (``limit_concurrency``);
both are used.  It has none for the request head: httptools buffers headers of
any size, and uvicorn's keep-alive timer is not armed on a fresh connection and
is cancelled by the first byte of the next request, so a client that trickles
its headers holds the connection forever.  :class:`GuardedHttpToolsProtocol`
adds the two missing limits to uvicorn's own httptools protocol:

- the request line plus headers may hold at most ``max_header_bytes``; more
  gets ``431`` in the protocol's error shape and the connection is closed;
- they must arrive within ``header_timeout_s`` of the connection opening (or
  of the previous answer); a partial head then gets ``408`` and the connection
  is closed, an idle connection is closed silently.

Each refusal is counted in ``audio_reward_requests_total`` with the endpoint
``unmatched``: no path was read, so there is no route to name.

The body has its own deadline (``body_timeout_s``, in :mod:`.body`).
"""

from __future__ import annotations

import asyncio
import logging
import signal
from types import FrameType
from typing import Any, ClassVar

import orjson
import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from ..config import ServerConfig
from ..errors import error_body
from ..service.prometheus import ServerMetrics
from .middleware import UNMATCHED

log = logging.getLogger(__name__)

_HEAD_END = b"\r\n\r\n"
_REASONS = {408: b"Request Timeout", 431: b"Request Header Fields Too Large"}
_LINGER_S = 1.0
"""After a refusal, the client's further bytes are read and dropped this long before the socket
closes: closing with unread data makes the kernel reset the connection, and the client would
see a reset instead of the answer."""


class GuardedHttpToolsProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol with a size limit and a deadline on each request head."""

    max_header_bytes: ClassVar[int] = 64 * 1024
    header_timeout_s: ClassVar[float] = 10.0
    metrics: ClassVar[ServerMetrics]
    """Where the refusals are counted; a class attribute because uvicorn builds the protocol per connection."""
    # Each connection's head state starts from these (immutable) defaults; the instance's own values replace them.
    _awaiting_head = True
    _head_bytes = 0
    _head_tail = b""  # the last bytes seen, so a CRLFCRLF split across reads is found
    _head_timer: asyncio.TimerHandle | None = None
    _refused = False

    @classmethod
    def configured(cls, max_header_bytes: int, header_timeout_s: float,
                   metrics: ServerMetrics) -> type[GuardedHttpToolsProtocol]:
        """A subclass carrying these limits: uvicorn instantiates the protocol class itself."""
        return type(cls.__name__, (cls,), {"max_header_bytes": max_header_bytes, "header_timeout_s": header_timeout_s,
                                           "metrics": metrics})

    # -- asyncio.Protocol ---------------------------------------------------------------
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm_head_timer()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cancel_head_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return  # answered already; draining until the socket closes
        if self._awaiting_head:
            seen = self._head_tail + data
            end = seen.find(_HEAD_END)
            head = self._head_bytes + (len(data) if end < 0 else end + len(_HEAD_END) - len(self._head_tail))
            if head > self.max_header_bytes:
                self._refuse(431, "headers_too_large",
                             f"the request line and headers exceed {self.max_header_bytes} bytes (max_header_bytes)")
                return
            if end < 0:
                self._head_bytes = head
                self._head_tail = seen[-(len(_HEAD_END) - 1):]
        super().data_received(data)

    # -- httptools callbacks ------------------------------------------------------------
    def on_headers_complete(self) -> None:
        self._awaiting_head = False
        self._cancel_head_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._awaiting_head = True  # what comes next is the next request's head
        self._head_bytes = 0
        self._head_tail = b""

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing():
            self._arm_head_timer()

    # -- the head deadline --------------------------------------------------------------
    def _arm_head_timer(self) -> None:
        self._cancel_head_timer()
        self._head_timer = self.loop.call_later(self.header_timeout_s, self._head_timed_out)

    def _cancel_head_timer(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if not self._awaiting_head or self.transport.is_closing():
            return
        if self._head_bytes == 0 and not self._head_tail:
            self.transport.close()  # idle, nothing asked: nothing to answer
            return
        self._refuse(408, "header_timeout",
                     f"the request headers did not arrive within {self.header_timeout_s:g} s (header_timeout_s)")

    def _refuse(self, status: int, code: str, message: str) -> None:
        """Answer in the protocol's error shape, then close the connection."""
        self._refused = True
        self._cancel_head_timer()
        client = f"{self.client[0]}:{self.client[1]}" if self.client else None
        log.info("refused a request before its headers were read",
                 extra={"status": status, "code": code, "client": client})
        self.metrics.requests.labels(UNMATCHED, str(status)).inc()
        body = orjson.dumps(error_body(code, message, retryable=status == 408))
        head = (
            b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\ncontent-length: %d\r\nconnection: close\r\n\r\n"
            % (status, _REASONS[status], len(body))
        )
        self.transport.write(head + body)
        self.loop.call_later(_LINGER_S, self.transport.close)


def uvicorn_config(app: FastAPI, settings: ServerConfig, **overrides: Any) -> uvicorn.Config:
    """The uvicorn configuration every scorer server runs with (the CLI and the tests alike); ``app`` is
    :func:`~audio_reward.scorer_server.app.build_app`'s, whose metrics count the refused request heads."""
    options: dict[str, Any] = {
        "host": settings.host,
        "port": settings.port,
        "http": GuardedHttpToolsProtocol.configured(settings.max_header_bytes, settings.header_timeout_s,
                                                    app.state.parts.metrics),
        "timeout_keep_alive": settings.keep_alive_timeout_s,
        "limit_concurrency": settings.max_connections,
        "log_config": None,
        "access_log": False,  # the request context middleware writes the access log, with latency and request id
        "timeout_graceful_shutdown": max(1, round(settings.shutdown_grace_s)),
        "lifespan": "on",
    }
    return uvicorn.Config(app, **(options | overrides))


class ForegroundServer(uvicorn.Server):
    """uvicorn's server for ``audio-reward serve``: SIGINT and SIGTERM are an operator's request to stop.

    uvicorn shuts down gracefully on either signal, then raises the signal again so the process dies
    of it (a ``KeyboardInterrupt`` traceback for Ctrl-C, exit status -15 for SIGTERM).  Here the
    graceful shutdown is the end: the command exits 0, and ``stop_signal`` says which signal asked.
    """

    stop_signal: int | None = None

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.stop_signal is None:
            self.stop_signal = sig
        if self.should_exit and sig == signal.SIGINT:
            self.force_exit = True  # a second Ctrl-C: stop waiting for requests in flight
        self.should_exit = True
