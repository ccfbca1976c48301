"""The client's retry rules without sockets: classify, backoff, batch answers, the retry loop on a scripted transport.

The wire itself (real sockets, dropped connections, garbled HTTP) is tested
against real servers in test_client_faults.py and test_real_server.py; here
the ``transport=`` hook stands in for the network where what is tested is
the client's reading of answers.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import orjson
import pytest

from audio_reward.scorer_client import (
    AsyncScorerClient,
    ProtocolViolationError,
    RequestRejectedError,
    ScoreItem,
    ScoreResult,
    ScorerUnavailableError,
    TransientServerError,
    errors,
)
from audio_reward.scorer_client.core import batch_outcomes, take_batch_answer
from audio_reward.scorer_client.transport import (
    AsyncTransport,
    ConnectError,
    Fatal,
    ReadError,
    Request,
    Response,
    Retry,
    Success,
    TransportTimeout,
    backoff_delay,
    classify,
    next_delay,
    parse_retry_after,
)
from audio_reward.scorer_client.wire import PreparedItem


def error_body(code: str, retryable: bool | None = None) -> bytes:
    error: dict[str, Any] = {"code": code, "message": f"injected {code}"}
    if retryable is not None:
        error["retryable"] = retryable
    return orjson.dumps({"error": error})


# ---------------------------------------------------------------- classify


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
def test_transient_statuses_are_retried_with_their_retry_after(status: int) -> None:
    outcome = classify(Response(status, error_body("overloaded"), {"retry-after": "2"}), "r1")
    assert isinstance(outcome, Retry) and outcome.retry_after == 2.0
    cause = outcome.cause
    assert isinstance(cause, TransientServerError)
    assert (cause.status, cause.code, cause.request_id, cause.retry_after) == (status, "overloaded", "r1", 2.0)


@pytest.mark.parametrize("status", [400, 401, 403, 404, 405, 413, 422, 431])
def test_other_4xx_are_final(status: int) -> None:
    # A 4xx is final even when its body claims to be retryable.
    outcome = classify(Response(status, error_body("bad", retryable=True)), "r2")
    assert isinstance(outcome, Fatal) and isinstance(outcome.error, RequestRejectedError)
    assert (outcome.error.status, outcome.error.code, outcome.error.request_id) == (status, "bad", "r2")


def test_a_5xx_marked_final_by_the_server_is_final() -> None:
    outcome = classify(Response(500, error_body("engine_crash", retryable=False)), "r3")
    assert isinstance(outcome, Fatal) and outcome.error.code == "engine_crash"  # type: ignore[attr-defined]


def test_success_carries_the_body_and_non_json_errors_keep_their_text() -> None:
    assert classify(Response(200, b'{"score": 1}')) == Success(b'{"score": 1}')
    outcome = classify(Response(502, b"<html>bad gateway</html>"))
    assert isinstance(outcome, Retry) and isinstance(outcome.cause, TransientServerError)
    assert outcome.cause.code == "http_502" and "bad gateway" in outcome.cause.message


@pytest.mark.parametrize("fault", [ConnectError("refused"), ReadError("reset"), TransportTimeout("slow")])
def test_transport_faults_are_retried_as_they_are(fault: Exception) -> None:
    outcome = classify(fault, "r4")  # type: ignore[arg-type]
    assert isinstance(outcome, Retry) and outcome.cause is fault and outcome.retry_after is None


def test_an_answer_that_is_not_http_is_final_and_names_the_request() -> None:
    outcome = classify(ProtocolViolationError("not HTTP"), "r5")
    assert isinstance(outcome, Fatal) and isinstance(outcome.error, ProtocolViolationError)
    assert outcome.error.request_id == "r5" and outcome.error.message == "not HTTP"


def test_transport_timeout_is_an_asyncio_timeout() -> None:
    import asyncio

    assert isinstance(TransportTimeout("x"), asyncio.TimeoutError)


# ---------------------------------------------------------------- backoff


def test_backoff_is_full_jitter_below_the_capped_exponential() -> None:
    rng = random.Random(7)
    for retry in range(80):
        ceiling = min(5.0, 0.1 * 2.0 ** min(retry, 62))
        delays = [backoff_delay(retry, 0.1, 5.0, rng) for _ in range(50)]
        assert all(0.0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling / 2  # spread over the range, not pinned at 0
    assert backoff_delay(10_000, 1.0, 3.0, rng) <= 3.0  # no overflow on a huge retry count
    assert backoff_delay(3, 0.0, 3.0, rng) == 0.0


def test_retry_after_raises_the_wait_up_to_its_cap() -> None:
    rng = random.Random(1)
    assert 2.5 <= next_delay(0, base=0.0, cap=1.0, retry_after=2.5, retry_after_max=60.0, rng=rng) <= 2.5 * 1.5
    assert 0.2 <= next_delay(0, base=0.0, cap=1.0, retry_after=3600.0, retry_after_max=0.2, rng=rng) <= 0.2 * 1.5
    assert next_delay(0, base=0.0, cap=1.0, retry_after=None, retry_after_max=0.2, rng=rng) == 0.0


def test_clients_told_the_same_retry_after_come_back_spread_out() -> None:
    rng = random.Random(3)
    waits = [next_delay(0, base=0.0, cap=1.0, retry_after=4.0, retry_after_max=60.0, rng=rng) for _ in range(200)]
    assert min(waits) >= 4.0 and max(waits) <= 6.0
    assert max(waits) - min(waits) > 1.5  # spread over the half again, not pinned at the server's figure


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after("3") == 3.0 and parse_retry_after(" 0.5 ") == 0.5
    assert parse_retry_after("-4") == 0.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=1445412480.0) == pytest.approx(10.0)
    for bad in (None, "", "soon", "inf", "nan"):
        assert parse_retry_after(bad) is None


# ---------------------------------------------------------------- batch answers


def prepared(n: int) -> list[PreparedItem]:
    return [PreparedItem(request_id=f"b{i}", body=b"{}") for i in range(n)]


def result(rid: str, score: float = 0.5) -> dict[str, Any]:
    return {"score": score, "cer": 0.0, "request_id": rid, "protocol_version": "1"}


def test_batch_answer_maps_each_item_without_changing_its_arguments() -> None:
    items = prepared(4)
    before = list(items)
    body = orjson.dumps({"protocol_version": "1", "results": [
        result("b0", 0.25),
        {"error": {"code": "engine_busy", "message": "busy", "retryable": True}},
        {"error": {"code": "empty_audio", "message": "empty", "retryable": False}},
        {"score": "0.5"},
    ]})
    outcomes = take_batch_answer(body, items)
    assert items == before
    ok, busy, final, broken = outcomes
    assert isinstance(ok, Success) and isinstance(ok.value, ScoreResult)
    assert ok.value.score == 0.25 and ok.value.request_id == "b0"
    assert isinstance(busy, Retry) and isinstance(busy.cause, TransientServerError)
    assert busy.cause.status is None and busy.cause.request_id == "b1"
    assert isinstance(final, Fatal) and isinstance(final.error, RequestRejectedError)
    assert final.error.code == "empty_audio" and final.error.request_id == "b2"
    assert isinstance(broken, Fatal) and isinstance(broken.error, ProtocolViolationError)
    assert broken.error.request_id == "b3"


@pytest.mark.parametrize("body", [b'{"protocol_version": "1", "results": []}', b"not json", b'{"results": 3}'])
def test_a_batch_answer_that_breaks_the_protocol_fails_every_item(body: bytes) -> None:
    outcomes = take_batch_answer(body, prepared(2))
    assert all(isinstance(o, Fatal) and isinstance(o.error, ProtocolViolationError) for o in outcomes)
    assert [o.error.request_id for o in outcomes] == ["b0", "b1"]  # type: ignore[union-attr]


def test_a_fault_of_the_whole_batch_is_each_items_fault() -> None:
    items = prepared(3)
    retry = batch_outcomes(Response(503, error_body("overloaded"), {"Retry-After": "1"}), items)
    assert [type(o) for o in retry] == [Retry] * 3
    assert [o.cause.request_id for o in retry] == ["b0", "b1", "b2"]  # type: ignore[union-attr]
    assert len({id(o.cause) for o in retry}) == 3 and {o.retry_after for o in retry} == {1.0}  # type: ignore[union-attr]
    final = batch_outcomes(Response(400, error_body("bad_request")), items)
    assert [o.error.request_id for o in final] == ["b0", "b1", "b2"]  # type: ignore[union-attr]
    fault = ConnectError("refused")
    assert all(isinstance(o, Retry) and o.cause is fault for o in batch_outcomes(fault, items))


# ---------------------------------------------------------------- the retry loop over a scripted transport

Script = Callable[[Request, int], "Response | Exception"]


class ScriptedTransport(AsyncTransport):
    """Answers each POST by a script of (request, how many times its X-Request-ID was seen); GETs by ``info``."""

    def __init__(self, script: Script, info: dict[str, Any] | None = None) -> None:
        self.script = script
        self.info = info if info is not None else {"protocol_version": "1", "endpoints": ["/v1/score/batch"]}
        self.requests: list[Request] = []
        self.seen: dict[str, int] = {}
        self.closed = False

    async def handle_async_request(self, request: Request) -> Response:
        if request.method == "GET":
            return Response(200, orjson.dumps(self.info))
        self.requests.append(request)
        key = request.headers.get("X-Request-ID", "batch")
        self.seen[key] = self.seen.get(key, 0) + 1
        answer = self.script(request, self.seen[key])
        if isinstance(answer, Exception):
            raise answer
        return answer

    async def aclose(self) -> None:
        self.closed = True


def score_of(request: Request) -> Response:
    rid = request.headers["X-Request-ID"]
    return Response(200, orjson.dumps(result(rid, 0.75)))


FAST = {"backoff": 0.0, "backoff_max": 0.01}


async def test_the_loop_retries_transient_answers_with_the_same_bytes_and_id() -> None:
    def script(request: Request, seen: int) -> Response | Exception:
        if seen == 1:
            return ConnectError("refused")
        if seen == 2:
            return Response(503, error_body("overloaded"), {"Retry-After": "0"})
        return score_of(request)

    transport = ScriptedTransport(script)
    async with AsyncScorerClient(["http://a:1", "http://b:2"], transport=transport, max_retries=3, **FAST) as client:
        out = await client.score([0.0, 0.1], 16000, "x", request_id="same")
    assert out.score == 0.75 and out.request_id == "same"
    assert len(transport.requests) == 3 and len({r.body for r in transport.requests}) == 1
    assert {r.headers["X-Request-ID"] for r in transport.requests} == {"same"}
    hosts = [r.url.split("/")[2] for r in transport.requests]
    assert hosts[0] != hosts[1] and hosts[1] != hosts[2]  # each retry goes to the next URL
    assert transport.closed  # the client closes the transport it holds


async def test_the_loop_gives_up_after_max_retries_with_the_last_cause() -> None:
    transport = ScriptedTransport(lambda request, seen: Response(503, error_body("overloaded")))
    async with AsyncScorerClient("http://a:1", transport=transport, max_retries=2, **FAST) as client:
        with pytest.raises(ScorerUnavailableError) as info:
            await client.score([0.0], 16000, "x", request_id="down")
    assert info.value.attempts == 3 and len(transport.requests) == 3
    assert isinstance(info.value.last_cause, TransientServerError) and info.value.last_cause.request_id == "down"


async def test_the_loop_resends_only_the_items_still_pending() -> None:
    sent: list[list[str]] = []

    def script(request: Request, seen: int) -> Response:
        rids = [item["request_id"] for item in orjson.loads(request.body or b"{}")["items"]]
        sent.append(rids)
        out: list[dict[str, Any]] = []
        for rid in rids:
            if rid == "i1" and sum(rid in s for s in sent) <= 2:  # i1 fails twice on its own
                out.append({"error": {"code": "engine_busy", "message": "busy", "retryable": True}})
            elif rid == "i2":
                out.append({"error": {"code": "empty_audio", "message": "empty", "retryable": False}})
            else:
                out.append(result(rid))
        return Response(200, orjson.dumps({"protocol_version": "1", "results": out}))

    items = [ScoreItem([0.0, 0.1], 16000, f"t{i}", request_id=f"i{i}") for i in range(4)]
    async with AsyncScorerClient("http://a:1", transport=ScriptedTransport(script), max_retries=3, **FAST) as client:
        results = await client.score_many(items, chunk_size=4)
    assert sent == [["i0", "i1", "i2", "i3"], ["i1"], ["i1"]]
    assert isinstance(results[2], RequestRejectedError) and results[2].code == "empty_audio"
    assert [r.request_id for r in results] == ["i0", "i1", "i2", "i3"]
    assert all(isinstance(results[i], ScoreResult) for i in (0, 1, 3))


async def test_a_server_without_batches_gets_one_request_per_item() -> None:
    transport = ScriptedTransport(lambda request, seen: score_of(request), info={"protocol_version": "1",
                                                                               "endpoints": ["/v1/score"]})
    items = [ScoreItem([0.0, 0.1], 16000, "t", request_id=f"s{i}") for i in range(3)]
    async with AsyncScorerClient("http://a:1", transport=transport, **FAST) as client:
        results = await client.score_many(items, chunk_size=3)
    assert [r.request_id for r in results] == ["s0", "s1", "s2"]
    assert [r.url for r in transport.requests] == ["http://a:1/v1/score"] * 3


def _one_of_each_error() -> list[errors.ScorerError]:
    """An instance of every error class of the client, each argument set."""
    cause = ConnectError("refused")
    made = [
        errors.ScorerError("base", request_id="a"),
        errors.InvalidInputError("bad input", request_id="a"),
        errors.AudioTooLongError("too long", duration_s=61.0, limit_s=60.0, request_id="a"),
        errors.InvalidURLError("malformed", request_id="a"),
        errors.UnsupportedProtocolError("ftp", request_id="a"),
        errors.UnknownHostError("no such host", request_id="a"),
        errors.RequestRejectedError("refused", status=400, code="invalid_prompt", request_id="a"),
        errors.ProtocolViolationError("not JSON", request_id="a"),
        errors.ScorerUnavailableError("gone", attempts=3, last_cause=cause, request_id="a"),
        errors.DeadlineExceededError("late", attempts=2, last_cause=cause, request_id="a"),
        errors.TransientServerError("busy", status=503, code="overloaded", retry_after=1.5, request_id="a"),
    ]
    classes = {cls for name, cls in vars(errors).items()
               if isinstance(cls, type) and issubclass(cls, errors.ScorerError) and not name.startswith("_")}
    assert {type(e) for e in made} == classes, "an error class is missing here"
    return made


@pytest.mark.parametrize("error", _one_of_each_error(), ids=lambda e: type(e).__name__)
def test_an_error_for_another_request_is_a_copy_naming_that_request(error: errors.ScorerError) -> None:
    try:
        raise error from ValueError("the cause")
    except errors.ScorerError:
        pass
    copied = error.for_request("b")
    assert type(copied) is type(error) and copied is not error
    assert copied.request_id == "b" and error.request_id == "a"
    assert {**vars(copied), "request_id": "a"} == vars(error)
    assert (str(copied), copied.args, copied.__cause__) == (str(error), error.args, error.__cause__)
    assert error.for_request("a") is error
