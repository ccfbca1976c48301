"""A retried request (same request_id, same content) is transcribed once; different content never shares an answer."""

from __future__ import annotations

import asyncio
import concurrent.futures
import uuid

import httpx
import pytest

from audio_reward.protocol import encode_f32
from audio_reward.scorer_server.errors import EngineError
from audio_reward.scorer_server.service.dedup import RecentResults, request_key
from tests.testkit.probes import read_metrics
from tests.testkit.server import running_server
from tests.testkit.speech import synth_speech

TEXT = "The quick brown fox jumps over the lazy dog."
OTHER = "Seven purple elephants were painting the kitchen on a rainy Tuesday."


def body(prompt: str, request_id: str) -> dict[str, object]:
    audio, rate = synth_speech(TEXT)
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "num_samples": len(audio),
            "sample_rate": rate, "prompt": prompt, "request_id": request_id}


def utterances_transcribed(url: str) -> float:
    return read_metrics(url)["audio_reward_batch_size_sum{}"]


def test_retry_is_answered_without_transcribing_again(scorer_url: str) -> None:
    rid = uuid.uuid4().hex
    first = httpx.post(f"{scorer_url}/v1/score", json=body(TEXT, rid), timeout=120)
    before = utterances_transcribed(scorer_url)
    again = httpx.post(f"{scorer_url}/score", json=body(TEXT, rid), timeout=120)
    assert first.status_code == again.status_code == 200
    assert again.json() == first.json() and again.json()["request_id"] == rid
    assert utterances_transcribed(scorer_url) == before
    assert 'audio_reward_items_total{outcome="deduplicated"}' in httpx.get(f"{scorer_url}/metrics").text


def test_same_id_with_other_content_is_scored_on_its_own(scorer_url: str) -> None:
    rid = uuid.uuid4().hex
    good = httpx.post(f"{scorer_url}/v1/score", json=body(TEXT, rid), timeout=120).json()
    before = utterances_transcribed(scorer_url)
    other = httpx.post(f"{scorer_url}/v1/score", json=body(OTHER, rid), timeout=120).json()
    assert utterances_transcribed(scorer_url) == before + 1
    assert good["score"] >= 0.9 and other["score"] <= 0.4


def test_concurrent_copies_share_one_transcription(scorer_url: str) -> None:
    rid = uuid.uuid4().hex
    before = utterances_transcribed(scorer_url)
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        answers = list(
            pool.map(lambda _: httpx.post(f"{scorer_url}/v1/score", json=body(TEXT, rid), timeout=120), range(4))
        )
    assert {r.status_code for r in answers} == {200}
    assert len({r.text for r in answers}) == 1
    assert utterances_transcribed(scorer_url) == before + 1


def test_duplicates_inside_one_batch_are_scored_once(scorer_url: str) -> None:
    rid = uuid.uuid4().hex
    before = utterances_transcribed(scorer_url)
    items = [body(TEXT, rid), body(TEXT, rid), body(OTHER, uuid.uuid4().hex)]
    results = httpx.post(
        f"{scorer_url}/v1/score/batch", json={"protocol_version": "1", "items": items}, timeout=120
    ).json()["results"]
    assert results[0] == results[1] and results[0]["score"] >= 0.9 and results[2]["score"] <= 0.4
    assert utterances_transcribed(scorer_url) == before + 2


def test_turned_off_with_a_zero_cache() -> None:
    with running_server(model="tiny.en", dedup_cache_size=0) as server:
        rid = uuid.uuid4().hex
        httpx.post(f"{server.url}/v1/score", json=body(TEXT, rid), timeout=120)
        before = utterances_transcribed(server.url)
        httpx.post(f"{server.url}/v1/score", json=body(TEXT, rid), timeout=120)
        assert utterances_transcribed(server.url) == before + 1


async def test_failures_are_forgotten_and_old_answers_expire() -> None:
    import numpy as np

    recent = RecentResults(max_entries=2, ttl_s=60)
    key = request_key("a", "prompt", waveform=np.zeros(4, np.float32))
    assert key != request_key("a", "prompt", waveform=np.ones(4, np.float32))
    first = recent.claim(key)
    waiter = recent.claim(key)
    assert first.leader and not waiter.leader and waiter.future is first.future
    recent.fail(first, EngineError("boom"))
    with pytest.raises(EngineError):
        await waiter.future
    again = recent.claim(key)
    assert again.leader  # a failed request runs again when retried
    for name in ("b", "c", "d"):
        k = request_key(name, waveform=np.zeros(1, np.float32))
        recent.resolve(recent.claim(k), "a transcript")
    assert len(recent) == 2  # bounded: answers beyond max_entries go oldest first; the one in flight stays
    short = RecentResults(max_entries=10, ttl_s=0.01)
    short.resolve(short.claim(key), "a transcript")
    await asyncio.sleep(0.05)
    assert short.claim(key).leader  # expired: scored again


async def test_kept_transcripts_are_bounded_in_bytes() -> None:
    import numpy as np

    from audio_reward.scorer_server.service.dedup import ENTRY_OVERHEAD_BYTES

    limit = 64 * 1024
    recent = RecentResults(max_entries=10_000, ttl_s=60, max_bytes=limit)
    for i in range(1_000):
        key = request_key(str(i), waveform=np.zeros(1, np.float32))
        claim = recent.claim(key)
        assert claim.leader
        recent.resolve(claim, "x" * 1_000, 1_000)
        assert recent.bytes <= limit  # never above the bound, after every answer
    assert len(recent) == limit // (1_000 + ENTRY_OVERHEAD_BYTES)
    last = request_key("999", waveform=np.zeros(1, np.float32))
    assert not recent.claim(last).leader  # the newest answers are the ones kept
