"""A batch that runs past the request timeout answers what finished, and a retry transcribes only the rest.

A real server process with the instant engine slowed to 400 ms per engine call, one utterance per call and a
1 s request timeout: a batch of six cannot finish in time.  The engine calls are counted on ``/metrics``
(``audio_reward_batch_size_count``), so "nothing is transcribed twice" is a count, not a timing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from audio_reward.protocol import encode_f32
from audio_reward.scorer_client import AsyncScorerClient, ScoreItem, ScoreResult
from tests.testkit.instant_engine import SAMPLE_RATE, clip, prompt_of
from tests.testkit.probes import read_metrics
from tests.testkit.server import ServerHandle, running_server

CALL_MS = 400
TIMEOUT_S = 1.0


@pytest.fixture(scope="module")
def slow_server() -> Iterator[ServerHandle]:
    with running_server(instant=True, delay_ms=CALL_MS, max_batch_size=1, max_wait_ms=0,
                        request_timeout_s=TIMEOUT_S) as handle:
        yield handle


def engine_calls(url: str) -> float:
    return read_metrics(url).get("audio_reward_batch_size_count{}", 0.0)


def settled_engine_calls(url: str) -> float:
    """The engine call count once the engine has been idle for two call lengths (work left running finished)."""
    last, since = engine_calls(url), time.monotonic()
    while time.monotonic() - since < 2 * CALL_MS / 1000:
        time.sleep(0.05)
        now = engine_calls(url)
        if now != last:
            last, since = now, time.monotonic()
    return last


def item(i: int, prefix: str) -> dict[str, Any]:
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(clip(i)), "sample_rate": SAMPLE_RATE,
            "prompt": prompt_of(i), "request_id": f"{prefix}-{i}"}


def test_a_timed_out_batch_answers_its_finished_items_and_the_retry_transcribes_only_the_rest(
        slow_server: ServerHandle) -> None:
    url, n = slow_server.url, 6
    body = {"protocol_version": "1", "items": [item(i, "partial") for i in range(n)]}
    before = int(settled_engine_calls(url))

    first = httpx.post(f"{url}/v1/score/batch", json=body, timeout=30)
    assert first.status_code == 200, first.text
    results = first.json()["results"]
    finished = [i for i, r in enumerate(results) if "score" in r]
    unfinished = [i for i, r in enumerate(results) if "error" in r]
    # 400 ms per utterance against 1 s: some finish, not all; the finished ones are the first in the queue.
    assert finished and unfinished and finished == list(range(len(finished))), results
    for i in finished:
        assert results[i]["score"] == 1.0 and results[i]["request_id"] == f"partial-{i}"
    for i in unfinished:
        error = results[i]["error"]
        assert (error["code"], error["retryable"], error["request_id"]) == ("timeout", True, f"partial-{i}")

    # The utterance inside the engine at the deadline ran on; the queued ones left the queue untranscribed.
    after_first = int(settled_engine_calls(url))
    assert after_first - before <= len(finished) + 1

    # The same batch again, as a client that lost the answer would send it, until every item is scored: what
    # finished before comes from the recent-results cache, each round transcribes only what never ran.
    deduplicated = read_metrics(url).get('audio_reward_items_total{outcome="deduplicated"}', 0.0)
    again = httpx.post(f"{url}/v1/score/batch", json=body, timeout=30).json()["results"]
    assert all("score" in again[i] for i in range(after_first - before)), again
    rounds = 1
    while any("error" in r for r in again) and rounds < n:
        again = httpx.post(f"{url}/v1/score/batch", json=body, timeout=30).json()["results"]
        rounds += 1
    assert [r.get("score") for r in again] == [1.0] * n, again
    assert [r["request_id"] for r in again] == [f"partial-{i}" for i in range(n)]
    # Over every request, each utterance went through the engine exactly once.
    assert settled_engine_calls(url) - before == n
    assert read_metrics(url)['audio_reward_items_total{outcome="deduplicated"}'] - deduplicated >= after_first - before


def test_the_client_retries_only_the_unfinished_items(slow_server: ServerHandle) -> None:
    url, n = slow_server.url, 8
    before = int(settled_engine_calls(url))

    async def score() -> list[Any]:
        async with AsyncScorerClient(url, max_retries=10, backoff=0.05, backoff_max=0.2, timeout=30) as client:
            return await client.score_many(
                [ScoreItem(clip(i), SAMPLE_RATE, prompt_of(i), request_id=f"client-{i}") for i in range(n)],
                chunk_size=n, concurrency=1)

    results = asyncio.run(score())
    assert all(isinstance(r, ScoreResult) and r.score == 1.0 for r in results), results
    assert [r.request_id for r in results] == [f"client-{i}" for i in range(n)]
    # Several requests, since each one answers only what finished within 1 s, but one engine call per item.
    assert settled_engine_calls(url) - before == n
    batches = read_metrics(url)['audio_reward_requests_total{endpoint="/v1/score/batch",status="200"}']
    assert batches >= 3
