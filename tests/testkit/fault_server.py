"""A real HTTP scorer on loopback that misbehaves on demand.

It speaks protocol v1 (it validates every request with the protocol
package) but answers what the test's policy says: a score, an error status
with ``Retry-After``, a dropped connection, a slow answer, malformed JSON,
a non-finite score, a nested diagnostic, per-item batch errors.  It counts
every request id it receives and every one it answers with a score, so a
test can assert the exact number of attempts and that nothing was scored twice.
"""

from __future__ import annotations

import asyncio
import collections
import threading
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field

import orjson
from aiohttp import web

from audio_reward.protocol import (
    ProtocolError,
    decode_batch_request,
    decode_score_request,
    parse_json,
)

from .loopback import LoopbackServer


def expected_score(request_id: str) -> float:
    """The score this server gives a request id: lets a test check that answers match items."""
    return (zlib.crc32(request_id.encode()) % 10_000) / 10_000


@dataclass
class Score:
    """Answer with the expected score (a batch item, or a whole single request)."""

    extra: dict = field(default_factory=dict)


@dataclass
class Status:
    status: int
    code: str = "overloaded"
    retryable: bool = True
    retry_after: str | None = None


@dataclass
class Drop:
    """Close the connection without answering."""


@dataclass
class Garbage:
    """Bytes that are not an HTTP response, then close."""


@dataclass
class Slow:
    seconds: float
    then: Action = field(default_factory=Score)


@dataclass
class Held:
    """Answer ``then`` only once ``release`` is set (by the test, from its own thread: a test that holds an
    answer must set it whatever happens, or a worker thread waits for ever)."""

    release: threading.Event
    then: Action = field(default_factory=Score)


@dataclass
class Raw:
    """A 200 with this exact body (malformed JSON, NaN, nested values)."""

    body: bytes
    status: int = 200


@dataclass
class ItemError:
    """Inside a batch answer: this item's ``{"error": ...}``."""

    code: str = "engine_busy"
    retryable: bool = True


@dataclass
class Batch:
    """A 200 batch answer with one action (Score or ItemError) per item."""

    items: list


Action = Score | Status | Drop | Garbage | Slow | Held | Raw | Batch | ItemError


@dataclass
class Seen:
    """What the policy gets: the endpoint, the request ids in order, and the HTTP request count so far."""

    kind: str
    request_ids: list[str]
    attempt: int  # how many times the first request id has been received, this time included
    number: int  # 1-based count of HTTP requests at this endpoint kind


Policy = Callable[[Seen], Action]


def always_score(seen: Seen) -> Action:
    return Score() if seen.kind == "single" else Batch([Score() for _ in seen.request_ids])


class FaultServer(LoopbackServer):
    """Runs on its own thread and event loop so sync and async clients can both reach it."""

    def __init__(self, policy: Policy = always_score) -> None:
        super().__init__()
        self.policy = policy
        self.received: collections.Counter[str] = collections.Counter()
        self.scored: collections.Counter[str] = collections.Counter()
        self.http_requests: collections.Counter[str] = collections.Counter()
        self.headers: list[dict[str, str]] = []
        self.info: dict = {"protocol_version": "1", "model": "fault"}  # what GET /v1/info answers
        self.info_status: Status | None = None  # set: GET /v1/info answers this error instead
        self._lock = threading.Lock()

    def add_routes(self, app: web.Application) -> None:
        app.router.add_post("/v1/score", self._single)
        app.router.add_post("/score", self._single)
        app.router.add_post("/v1/score/batch", self._batch)
        app.router.add_get("/readyz", self._ready)
        app.router.add_get("/v1/info", self._info)

    async def _ready(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ready"})

    async def _info(self, request: web.Request) -> web.Response:
        if self.info_status is not None:
            error = self.info_status
            body = {"error": {"code": error.code, "message": f"injected {error.code}", "retryable": error.retryable}}
            return web.json_response(body, status=error.status)
        return web.json_response(self.info)

    def _see(self, kind: str, request_ids: list[str], headers: dict[str, str]) -> Seen:
        with self._lock:
            self.http_requests[kind] += 1
            self.received.update(request_ids)
            self.headers.append(headers)
            return Seen(kind, request_ids, self.received[request_ids[0]], self.http_requests[kind])

    def _score_body(self, rid: str, extra: dict) -> dict:
        with self._lock:
            self.scored[rid] += 1
        return {"score": expected_score(rid), "cer": 0.0, "transcript": "ok", "request_id": rid,
                "protocol_version": "1", **extra}

    async def _answer(self, request: web.Request, action: Action, rids: list[str]) -> web.StreamResponse:
        if isinstance(action, Slow):
            await asyncio.sleep(action.seconds)
            action = action.then
        if isinstance(action, Held):
            await asyncio.to_thread(action.release.wait)
            action = action.then
        if isinstance(action, Drop):
            assert request.transport is not None
            request.transport.abort()
            return web.Response(status=500)  # never delivered: the socket is gone
        if isinstance(action, Garbage):
            assert request.transport is not None
            request.transport.write(b"HTTP/1.1 twohundred OK\r\nbogus\r\n\r\n")
            request.transport.close()
            return web.Response(status=500)  # never delivered
        if isinstance(action, Status):
            headers = {"Retry-After": action.retry_after} if action.retry_after is not None else None
            body = {"error": {"code": action.code, "message": f"injected {action.code}", "retryable": action.retryable}}
            return web.json_response(body, status=action.status, headers=headers)
        if isinstance(action, Raw):
            return web.Response(body=action.body, status=action.status, content_type="application/json")
        if isinstance(action, Score):
            body = orjson.dumps(self._score_body(rids[0], action.extra))
            return web.Response(body=body, content_type="application/json")
        if isinstance(action, Batch):
            results = []
            for rid, item in zip(rids, action.items, strict=True):
                if isinstance(item, ItemError):
                    results.append(
                        {
                            "error": {
                                "code": item.code,
                                "message": f"injected {item.code}",
                                "retryable": item.retryable,
                                "request_id": rid,
                            }
                        }
                    )
                else:
                    results.append(self._score_body(rid, item.extra))
            return web.Response(
                body=orjson.dumps({"protocol_version": "1", "results": results}), content_type="application/json"
            )
        raise AssertionError(f"unknown action {action!r}")

    @staticmethod
    def _reject(exc: ProtocolError) -> web.Response:
        return web.json_response({"error": {"code": exc.code, "message": str(exc), "retryable": False}}, status=400)

    async def _single(self, request: web.Request) -> web.StreamResponse:
        try:
            decoded = decode_score_request(parse_json(await request.read()))
        except ProtocolError as exc:
            return self._reject(exc)
        rids = [decoded.request_id or "-"]
        return await self._answer(request, self.policy(self._see("single", rids, dict(request.headers))), rids)

    async def _batch(self, request: web.Request) -> web.StreamResponse:
        try:
            _, items = decode_batch_request(parse_json(await request.read()))
        except ProtocolError as exc:
            return self._reject(exc)
        bad = next((i for i in items if isinstance(i, ProtocolError)), None)
        if bad is not None:
            return self._reject(bad)
        rids = [i.request_id or "-" for i in items]  # type: ignore[union-attr]
        return await self._answer(request, self.policy(self._see("batch", rids, dict(request.headers))), rids)
