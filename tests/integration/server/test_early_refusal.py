"""A request the queue cannot finish within the timeout is refused at admission with 429, not answered 504 later.

A real server process with the instant engine slowed to 400 ms per engine call (one 0.1 s clip per call: 0.25
audio seconds per second) and a 2.2 s request timeout: four requests fit (the estimated wait may fill 80 % of
the timeout), a burst of twelve does not, and the refused ones are told to come back in turns.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from audio_reward.protocol import encode_f32
from audio_reward.scorer_client import AsyncScorerClient, ScoreResult
from tests.testkit.instant_engine import SAMPLE_RATE, clip, prompt_of
from tests.testkit.probes import read_metrics
from tests.testkit.server import ServerHandle, running_server

CALL_S = 0.4
TIMEOUT_S = 2.2


@pytest.fixture(scope="module")
def slow_server() -> Iterator[ServerHandle]:
    with running_server(instant=True, delay_ms=CALL_S * 1000, max_batch_size=1, max_wait_ms=0,
                        request_timeout_s=TIMEOUT_S) as handle:
        for i in range(3):  # the throughput is measured over a few engine calls before it is trusted
            assert httpx.post(f"{handle.url}/v1/score", json=body(i, "warm"), timeout=30).status_code == 200
        yield handle


def body(i: int, prefix: str) -> dict[str, Any]:
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(clip(i)), "sample_rate": SAMPLE_RATE,
            "prompt": prompt_of(i), "request_id": f"{prefix}-{i}"}


async def timed_post(client: httpx.AsyncClient, url: str, payload: dict[str, Any]) -> tuple[httpx.Response, float]:
    started = time.monotonic()
    answer = await client.post(url, json=payload)
    return answer, time.monotonic() - started


def test_a_burst_past_the_timeout_is_refused_at_once_and_nothing_times_out(slow_server: ServerHandle) -> None:
    url = slow_server.url
    metrics = read_metrics(url)
    assert metrics["audio_reward_engine_throughput_audio_seconds_per_second{}"] == pytest.approx(0.1 / CALL_S,
                                                                                                rel=0.3)

    async def burst() -> list[tuple[httpx.Response, float]]:
        async with httpx.AsyncClient(timeout=30) as client:
            return list(await asyncio.gather(*(timed_post(client, f"{url}/v1/score", body(i, "burst"))
                                               for i in range(12))))

    answers = asyncio.run(burst())
    codes = sorted(a.status_code for a, _ in answers)
    assert set(codes) == {200, 429}, codes
    assert 2 <= codes.count(200) <= 6, codes  # what 0.8 x 2.2 s of engine time holds, give or take one
    # Successive turns: each refused request comes back 0.4 s (its clip's engine time) after the one before.
    turns = sorted(int(a.headers["Retry-After"]) for a, _ in answers if a.status_code == 429)
    assert turns[-1] - turns[0] >= 2 and len(set(turns)) >= 3, turns
    for answer, seconds in answers:
        if answer.status_code == 200:
            assert answer.json()["score"] == 1.0
            continue
        error = answer.json()["error"]
        assert (error["code"], error["retryable"]) == ("overloaded", True)
        assert "audio seconds per second" in error["message"]
        assert int(answer.headers["Retry-After"]) >= 1
        assert seconds < TIMEOUT_S / 2  # refused at admission, not after waiting
    after = read_metrics(url)
    assert not any(key.startswith("audio_reward_requests_total") and 'status="504"' in key for key in after)
    assert after['audio_reward_requests_total{endpoint="/v1/score",status="429"}'] == codes.count(429)
    assert "audio_reward_estimated_wait_seconds{}" in after and "audio_reward_queued_audio_seconds{}" in after


def test_the_client_with_its_default_retries_gets_every_item_scored_without_a_timeout(
        slow_server: ServerHandle) -> None:
    url = slow_server.url

    async def score() -> list[Any]:
        async with AsyncScorerClient(url, timeout=30) as client:
            async def one(i: int) -> Any:
                return await client.score(clip(i), SAMPLE_RATE, prompt_of(i), request_id=f"client-{i}")
            return list(await asyncio.gather(*(one(i) for i in range(10)), return_exceptions=True))

    results = asyncio.run(score())
    assert all(isinstance(r, ScoreResult) and r.score == 1.0 for r in results), results
    assert not any(key.startswith("audio_reward_requests_total") and 'status="504"' in key
                   for key in read_metrics(url))
