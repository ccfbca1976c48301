"""The async client against a real misbehaving server on loopback."""

from __future__ import annotations

import asyncio
import socket
import time

import numpy as np
import pytest

from audio_reward.scorer_client import (
    AsyncScorerClient,
    DeadlineExceededError,
    InvalidInputError,
    ProtocolViolationError,
    RequestRejectedError,
    ScoreItem,
    ScoreResult,
    ScorerUnavailableError,
    TransientServerError,
    UnknownHostError,
)
from tests.testkit.fault_server import (
    Batch,
    Drop,
    FaultServer,
    Garbage,
    ItemError,
    Raw,
    Score,
    Seen,
    Slow,
    Status,
    always_score,
    expected_score,
)

FAST = {"backoff": 0.01, "backoff_max": 0.05, "timeout": 5.0}


def first_n_then_score(n: int, fault):
    def policy(seen: Seen):
        return fault if seen.attempt <= n else always_score(seen)
    return policy


@pytest.mark.parametrize(
    "fault",
    [Drop(), Status(503, retry_after="0"), Status(500, code="internal"), Status(502), Status(429, retry_after="0"),
     Status(408, code="timeout")],
    ids=["drop", "503", "500", "502", "429", "408"],
)
async def test_retryable_fault_recovers(fault_server: FaultServer, tone: np.ndarray, fault) -> None:
    fault_server.policy = first_n_then_score(2, fault)
    async with AsyncScorerClient(fault_server.url, max_retries=3, **FAST) as client:
        result = await client.score(tone, 16000, "hello", request_id="r1")
    assert result.request_id == "r1" and result.diagnostics["request_id"] == "r1"
    assert result.score == expected_score("r1")
    assert fault_server.received["r1"] == 3
    assert fault_server.scored["r1"] == 1


async def test_slow_answer_times_out_then_recovers(fault_server: FaultServer, tone: np.ndarray) -> None:
    fault_server.policy = first_n_then_score(1, Slow(2.0))
    async with AsyncScorerClient(fault_server.url, max_retries=2, backoff=0.01, timeout=0.3) as client:
        started = time.monotonic()
        result = await client.score(tone, 16000, "hello", request_id="slow")
    assert result.score == expected_score("slow")
    assert fault_server.received["slow"] == 2
    assert time.monotonic() - started < 1.5


@pytest.mark.parametrize(
    ("fault", "error", "code"),
    [
        (Status(400, code="invalid_prompt", retryable=False), RequestRejectedError, "invalid_prompt"),
        (Status(401, code="unauthorized", retryable=False), RequestRejectedError, "unauthorized"),
        (Status(413, code="payload_too_large", retryable=False), RequestRejectedError, "payload_too_large"),
        (Status(501, code="not_implemented", retryable=False), RequestRejectedError, "not_implemented"),
        (Garbage(), ProtocolViolationError, None),
        (Raw(b'{"score": 0.5,'), ProtocolViolationError, None),
        (Raw(b"<html>ok</html>"), ProtocolViolationError, None),
        (Raw(b'{"score": NaN, "cer": 0.1}'), ProtocolViolationError, None),
        (Raw(b'{"score": 0.5, "cer": Infinity}'), ProtocolViolationError, None),
        (Raw(b'{"score": 0.5, "details": {"cer": 0.1}}'), ProtocolViolationError, None),
        (Raw(b'{"score": 0.5, "words": ["a"]}'), ProtocolViolationError, None),
        (Raw(b'{"score": "0.5"}'), ProtocolViolationError, None),
        (Raw(b'{"score": true}'), ProtocolViolationError, None),
        (Raw(b'{"cer": 0.1}'), ProtocolViolationError, None),
        (Raw(b'{"score": 0.5, "request_id": "someone-else"}'), ProtocolViolationError, None),
    ],
    ids=["400", "401", "413", "501-final", "not-http", "truncated-json", "html", "nan-score", "inf-diag", "nested-diag",
         "list-diag", "string-score", "bool-score", "no-score", "wrong-request-id"],
)
async def test_final_fault_raises_at_once(fault_server: FaultServer, tone: np.ndarray, fault, error, code) -> None:
    fault_server.policy = lambda seen: fault
    async with AsyncScorerClient(fault_server.url, max_retries=5, **FAST) as client:
        with pytest.raises(error) as info:
            await client.score(tone, 16000, "hello", request_id="final")
    assert fault_server.received["final"] == 1
    assert info.value.request_id == "final"
    if code is not None:
        assert info.value.code == code
        assert info.value.status == fault.status


async def test_retries_exhausted_raise_unavailable_with_last_cause(fault_server: FaultServer, tone: np.ndarray) -> None:
    fault_server.policy = lambda seen: Status(503, code="overloaded", retry_after="0")
    async with AsyncScorerClient(fault_server.url, max_retries=2, **FAST) as client:
        with pytest.raises(ScorerUnavailableError) as info:
            await client.score(tone, 16000, "hello", request_id="down")
    assert not isinstance(info.value, DeadlineExceededError)
    assert info.value.attempts == 3
    assert fault_server.received["down"] == 3
    assert isinstance(info.value.last_cause, TransientServerError)
    assert info.value.last_cause.status == 503 and info.value.last_cause.code == "overloaded"


async def test_connection_refused_is_unavailable(dead_url: str) -> None:
    async with AsyncScorerClient(dead_url, max_retries=1, **FAST) as client:
        with pytest.raises(ScorerUnavailableError) as info:
            await client.score([0.0, 0.1, 0.2], 16000, "x")
    assert info.value.attempts == 2
    assert "Connect" in type(info.value.last_cause).__name__


def _resolver_says_no_such_host(host: str) -> bool:
    """Whether this machine's resolver answers "no such name" for ``host`` (not "cannot answer now")."""
    try:
        socket.getaddrinfo(host, 80)
    except socket.gaierror as exc:
        return exc.errno != socket.EAI_AGAIN
    return False


async def test_an_unknown_host_is_final_not_retried(tone: np.ndarray) -> None:
    """Issue 40, finding 2: a host DNS does not know is a wrong URL, not a temporary outage (.invalid never
    resolves, RFC 2606)."""
    if not _resolver_says_no_such_host("no-such-scorer.invalid"):
        pytest.skip("this machine's resolver cannot say whether a name exists")
    async with AsyncScorerClient("http://no-such-scorer.invalid:8000", max_retries=3, backoff=1.0) as client:
        started = time.monotonic()
        with pytest.raises(UnknownHostError) as info:
            await client.score(tone, 16000, "x")
        assert not await client.ready()
        (outcome,) = await client.score_many([(tone, 16000, "x")])
    assert time.monotonic() - started < 5  # three retries would wait up to 1 + 2 + 4 s
    assert isinstance(outcome, UnknownHostError) and isinstance(info.value, InvalidInputError)
    assert str(info.value).startswith("the scorer host 'no-such-scorer.invalid' of http://no-such-scorer.invalid")
    assert "does not resolve" in str(info.value) and "\n" not in str(info.value)


async def test_retry_after_is_honoured_and_capped(fault_server: FaultServer, tone: np.ndarray) -> None:
    fault_server.policy = first_n_then_score(1, Status(429, code="rate_limited", retry_after="0.4"))
    async with AsyncScorerClient(fault_server.url, max_retries=1, backoff=0.0, timeout=5.0) as client:
        started = time.monotonic()
        await client.score(tone, 16000, "hello")
        assert time.monotonic() - started >= 0.4
    fault_server.policy = first_n_then_score(1, Status(503, retry_after="3600"))
    async with AsyncScorerClient(fault_server.url, max_retries=1, backoff=0.0, retry_after_max=0.2) as client:
        started = time.monotonic()
        await client.score(tone, 16000, "hello")
        assert 0.2 <= time.monotonic() - started < 2.0


async def test_deadline_bounds_the_whole_request(fault_server: FaultServer, tone: np.ndarray) -> None:
    fault_server.policy = lambda seen: Slow(5.0)
    async with AsyncScorerClient(fault_server.url, max_retries=10, timeout=0.3, backoff=0.01, deadline=1.0) as client:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError) as info:
            await client.score(tone, 16000, "hello")
        elapsed = time.monotonic() - started
    assert 0.9 <= elapsed < 1.6
    assert 2 <= info.value.attempts <= 4
    # A Retry-After longer than what is left of the deadline ends the request at once instead of sleeping.
    fault_server.policy = lambda seen: Status(503, retry_after="30")
    async with AsyncScorerClient(fault_server.url, max_retries=10, deadline=2.0, retry_after_max=60) as client:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            await client.score(tone, 16000, "hello")
        assert time.monotonic() - started < 0.5


async def test_request_id_is_stable_across_retries_and_sent_as_header(
    fault_server: FaultServer, tone: np.ndarray
) -> None:
    fault_server.policy = first_n_then_score(2, Status(503, retry_after="0"))
    async with AsyncScorerClient(fault_server.url, max_retries=3, api_key="s3cret", **FAST) as client:
        result = await client.score(tone, 16000, "hello")
    assert len(result.request_id) == 32 and int(result.request_id, 16) >= 0
    assert list(fault_server.received) == [result.request_id]
    assert fault_server.received[result.request_id] == 3
    assert {h["X-Request-ID"] for h in fault_server.headers} == {result.request_id}
    assert {h["Authorization"] for h in fault_server.headers} == {"Bearer s3cret"}


async def test_bad_input_fails_before_sending(fault_server: FaultServer) -> None:
    async with AsyncScorerClient(fault_server.url, **FAST) as client:
        for args, match in [
            (([], 16000, "x"), "no samples"),
            (([0.0, float("nan")], 16000, "x"), "NaN"),
            (([0.0], 0, "x"), "sample_rate"),
            (([0.0], 16000.5, "x"), "sample_rate"),
            ((np.zeros((2, 10)), 16000, "x"), "mono"),
            (([0.0], 16000, None), "text"),
        ]:
            with pytest.raises(InvalidInputError, match=match):
                await client.score(*args)
        with pytest.raises(InvalidInputError, match="metadata"):
            await client.score([0.0], 16000, "x", metadata={"bad": [1, 2]})
        with pytest.raises(InvalidInputError, match="reward"):
            await client.score([0.0], 16000, "x", reward={"formula": "nope"})
    assert sum(fault_server.http_requests.values()) == 0


async def test_waveforms_as_list_numpy_and_torch(fault_server: FaultServer, tone: np.ndarray) -> None:
    async with AsyncScorerClient(fault_server.url, **FAST) as client:
        from_list = await client.score(tone.tolist(), 16000, "x", request_id="list")
        from_int16 = await client.score((tone * 32767).astype(np.int16), 16000, "x", request_id="pcm")
        assert from_list.score == expected_score("list") and from_int16.score == expected_score("pcm")
        torch = pytest.importorskip("torch")
        from_torch = await client.score(torch.from_numpy(tone), np.int64(16000), "x", request_id="torch")
        assert from_torch.score == expected_score("torch")


async def test_urls_round_robin_and_skip_a_dead_one(tone: np.ndarray, dead_url: str) -> None:
    with FaultServer() as a, FaultServer() as b:
        async with AsyncScorerClient([a.url, b.url + "/score"], **FAST) as client:
            for _ in range(10):
                await client.score(tone, 16000, "x")
        assert a.http_requests["single"] == 5 and b.http_requests["single"] == 5
        async with AsyncScorerClient([dead_url, a.url], max_retries=1, **FAST) as client:
            results = [await client.score(tone, 16000, "x") for _ in range(6)]
        assert len(results) == 6


async def test_client_is_bound_to_its_loop(fault_server: FaultServer, tone: np.ndarray) -> None:
    client = AsyncScorerClient(fault_server.url, **FAST)
    await client.score(tone, 16000, "x")

    def other_loop() -> None:
        asyncio.run(client.score(tone, 16000, "x"))

    with pytest.raises(RuntimeError, match="event loop"):
        await asyncio.to_thread(other_loop)
    await client.aclose()
    assert client._transport._session is None
    with pytest.raises(RuntimeError, match="closed"):
        await client.score(tone, 16000, "x")


# ---------------------------------------------------------------- score_many


def items(n: int, tone: np.ndarray, prefix: str = "item") -> list[ScoreItem]:
    return [ScoreItem(tone, 16000, f"text {i}", request_id=f"{prefix}-{i}") for i in range(n)]


async def test_score_many_keeps_order_and_uses_chunks(fault_server: FaultServer, tone: np.ndarray) -> None:
    async with AsyncScorerClient(fault_server.url, **FAST) as client:
        results = await client.score_many(items(23, tone), chunk_size=5, concurrency=2)
    assert [r.request_id for r in results] == [f"item-{i}" for i in range(23)]
    assert [r.score for r in results] == [expected_score(f"item-{i}") for i in range(23)]
    assert fault_server.http_requests["batch"] == 5
    assert set(fault_server.scored.values()) == {1}


async def test_score_many_retries_only_retryable_items(fault_server: FaultServer, tone: np.ndarray) -> None:
    # item-1 fails retryably twice, item-2 is final; the rest succeed at first.
    def policy(seen: Seen):
        out = []
        for rid in seen.request_ids:
            n = fault_server.received[rid]
            if rid == "item-1" and n <= 2:
                out.append(ItemError("engine_busy", retryable=True))
            elif rid == "item-2":
                out.append(ItemError("empty_audio", retryable=False))
            else:
                out.append(Score())
        return Batch(out)

    fault_server.policy = policy
    async with AsyncScorerClient(fault_server.url, max_retries=3, **FAST) as client:
        results = await client.score_many(items(4, tone), chunk_size=4)
    assert isinstance(results[2], RequestRejectedError) and results[2].code == "empty_audio"
    assert results[2].status is None and results[2].request_id == "item-2"
    assert [results[i].score for i in (0, 1, 3)] == [expected_score(f"item-{i}") for i in (0, 1, 3)]
    assert fault_server.received == {"item-0": 1, "item-1": 3, "item-2": 1, "item-3": 1}
    assert fault_server.http_requests["batch"] == 3


@pytest.mark.parametrize(
    ("too_big", "largest_answered"),
    [(Status(504, code="timeout"), 2), (Slow(2.0), 4)],
    ids=["server-504", "client-timeout"],
)
async def test_score_many_halves_a_chunk_that_timed_out(fault_server: FaultServer, tone: np.ndarray, too_big,
                                                        largest_answered: int) -> None:
    sizes: list[int] = []

    def policy(seen: Seen):
        sizes.append(len(seen.request_ids))
        return too_big if len(seen.request_ids) > largest_answered else always_score(seen)

    fault_server.policy = policy
    async with AsyncScorerClient(fault_server.url, max_retries=3, backoff=0.01, backoff_max=0.05,
                                 timeout=0.5) as client:
        results = await client.score_many(items(8, tone), chunk_size=8)
    assert [r.score for r in results] == [expected_score(f"item-{i}") for i in range(8)]
    # 8 timed out, then two requests of 4 (one attempt), then, where 4 timed out too, four of 2.
    expected = [8, 4, 4] if largest_answered == 4 else [8, 4, 4, 2, 2, 2, 2]
    assert sizes == expected
    assert set(fault_server.scored.values()) == {1}


async def test_score_many_reports_failures_without_losing_the_rest(fault_server: FaultServer, tone: np.ndarray) -> None:
    def policy(seen: Seen):
        if "item-0" in seen.request_ids:
            return Status(503, retry_after="0")  # the first chunk never recovers
        if "item-6" in seen.request_ids:
            return Garbage()
        if "item-4" in seen.request_ids:
            return Raw(b'{"protocol_version": "1", "results": []}')  # wrong length: a protocol violation
        return always_score(seen)

    fault_server.policy = policy
    good = items(9, tone)
    bad_input = ScoreItem([], 16000, "empty", request_id="empty")
    async with AsyncScorerClient(fault_server.url, max_retries=2, **FAST) as client:
        results = await client.score_many([*good, bad_input], chunk_size=2)
        assert [type(r).__name__ for r in results] == (
            ["ScorerUnavailableError"] * 2
            + ["ScoreResult"] * 2
            + ["ProtocolViolationError"] * 4
            + ["ScoreResult"]
            + ["InvalidInputError"]
        )
        assert [r.request_id for r in results[6:8]] == ["item-6", "item-7"]
        assert results[0].attempts == 3 and fault_server.received["item-0"] == 3
        assert fault_server.received["item-4"] == 1
        with pytest.raises(ScorerUnavailableError):
            await client.score_many(good[:2], return_exceptions=False)


async def test_score_many_accepts_mappings_and_tuples(fault_server: FaultServer, tone: np.ndarray) -> None:
    async with AsyncScorerClient(fault_server.url, **FAST) as client:
        results = await client.score_many(
            [
                {"waveform": tone, "sample_rate": 16000, "text": "a", "request_id": "m"},
                (tone, 16000, "b"),
                {"wave": tone},
            ]
        )
    assert results[0].score == expected_score("m")
    assert isinstance(results[1], ScoreResult)
    assert isinstance(results[2], InvalidInputError)


async def test_score_many_falls_back_when_the_server_has_no_batch_endpoint(tone: np.ndarray) -> None:
    with FaultServer() as server:
        # The batch route answers the 404 of a server without the endpoint.
        server.policy = lambda seen: Status(404, code="not_found", retryable=False) if seen.kind == "batch" else Score()
        async with AsyncScorerClient(server.url, **FAST) as client:
            results = await client.score_many(items(5, tone), chunk_size=5)
            assert [r.score for r in results] == [expected_score(f"item-{i}") for i in range(5)]
            await client.score_many(items(3, tone, "again"), chunk_size=5)
        assert server.http_requests == {"batch": 1, "single": 8}


async def test_thousand_candidates_against_a_flaky_server(fault_server: FaultServer, tone: np.ndarray) -> None:
    """A third of all answers fail (503s, dropped connections, retryable item errors); every item is scored once."""
    import random

    rng = random.Random(1234)

    def policy(seen: Seen):
        roll = rng.random()
        if roll < 0.12:
            return Status(503, retry_after="0")
        if roll < 0.22:
            return Drop()
        # Otherwise the batch goes through, a third of its items failing on their own.
        return Batch([ItemError("engine_busy") if rng.random() < 0.33 else Score() for _ in seen.request_ids])

    fault_server.policy = policy
    n = 1000
    # An attempt succeeds for an item with p = 0.78 x 0.67 = 0.52; with 12 retries one of the 1000 items
    # still runs out about 7 % of the time, so 40 retries keep the test about chance (0.48^41 per item).
    async with AsyncScorerClient(fault_server.url, max_retries=40, backoff=0.001, backoff_max=0.01) as client:
        results = await client.score_many(items(n, tone[:800]), chunk_size=16, concurrency=8)
    assert all(isinstance(r, ScoreResult) for r in results), [r for r in results if not isinstance(r, ScoreResult)][:3]
    assert [r.request_id for r in results] == [f"item-{i}" for i in range(n)]
    assert all(r.score == expected_score(r.request_id) for r in results)
    assert len(fault_server.scored) == n and set(fault_server.scored.values()) == {1}
    retried = sum(1 for c in fault_server.received.values() if c > 1)
    assert retried > n // 4  # the faults really happened
