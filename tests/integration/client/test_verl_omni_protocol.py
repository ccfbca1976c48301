"""The client against a server that has only verl-omni's ``POST /score``, with retries and faults.

The rule (docs/client.md): a URL that ends in an endpoint path is used exactly
as given; a base URL gets ``/v1/score``; batches go only to a server whose
``/v1/info`` lists the batch endpoint (asked once per URL), or fall back to one
request per item on a 404 or 405.
"""

from __future__ import annotations

import numpy as np
import pytest

from audio_reward.scorer_client import (
    AsyncScorerClient,
    RequestRejectedError,
    ScorerClient,
    ScoreResult,
)
from audio_reward.scorer_client.settings import ScorerEndpoint, endpoint_of
from audio_reward.trainer_plugin.verl_omni_score import close_cached_clients, compute_score
from tests.testkit.fault_server import FaultServer
from tests.testkit.verl_omni_server import VerlOmniProtocolServer, expected_score

FAST = {"backoff": 0.0, "backoff_max": 0.01, "timeout": 5.0}


def _waves(n: int) -> list[np.ndarray]:
    rng = np.random.default_rng(7)
    return [(rng.standard_normal(2400) * 0.01 * (i + 1)).astype(np.float32) for i in range(n)]


@pytest.mark.parametrize("url, expected", [
    ("http://h:8000/score", ScorerEndpoint("http://h:8000/score", "http://h:8000", "http://h:8000/score",
                                           "http://h:8000/v1/score/batch")),
    ("http://h/p/score/", ScorerEndpoint("http://h/p/score", "http://h/p", "http://h/p/score", "http://h/p/v1/score/batch")),
    ("http://h/v1/score", ScorerEndpoint("http://h/v1/score", "http://h", "http://h/v1/score", "http://h/v1/score/batch")),
    ("http://h/v1/score/batch", ScorerEndpoint("http://h/v1/score/batch", "http://h", "http://h/v1/score",
                                               "http://h/v1/score/batch")),
    ("http://h:8000", ScorerEndpoint("http://h:8000", "http://h:8000", "http://h:8000/v1/score",
                                     "http://h:8000/v1/score/batch")),
    ("https://h/scorer/", ScorerEndpoint("https://h/scorer", "https://h/scorer", "https://h/scorer/v1/score",
                                         "https://h/scorer/v1/score/batch")),
])
def test_url_rule(url: str, expected: ScorerEndpoint) -> None:
    assert endpoint_of(url) == expected


async def test_an_endpoint_url_is_used_exactly_as_given() -> None:
    waves = _waves(3)
    with VerlOmniProtocolServer() as server:
        async with AsyncScorerClient(server.url + "/score", **FAST) as client:
            results = [
                await client.score(w, 24_000, f"text {i}", metadata={"id": f"s{i}"}) for i, w in enumerate(waves)
            ]
    # /v1/info is asked once (the audio limit, batches): before, every request went to /v1/score and got a 404
    assert server.paths == {"GET /v1/info": 1, "POST /score": 3}
    assert [r.score for r in results] == [expected_score(w) for w in waves]
    assert [r.diagnostics["sample_id"] for r in results] == ["s0", "s1", "s2"]
    assert results[1].diagnostics["asr_text"] == "text 1"


async def test_score_many_asks_info_once_then_sends_one_request_per_item() -> None:
    waves = _waves(10)
    with VerlOmniProtocolServer() as server:
        async with AsyncScorerClient(server.url + "/score", chunk_size=4, concurrency=3, **FAST) as client:
            first = await client.score_many([(w, 16_000, "hello") for w in waves])
            second = await client.score_many([(w, 16_000, "hello") for w in waves])
    assert server.paths == {"GET /v1/info": 1, "POST /score": 20}  # no batch was ever sent
    for results in (first, second):
        assert [r.score for r in results if isinstance(r, ScoreResult)] == [expected_score(w) for w in waves]


async def test_faults_are_retried_and_every_item_is_scored_once() -> None:
    # Every third POST answers 503, every fifth drops the connection: verl-omni's transient faults.
    def faults(n: int) -> str | None:
        return "503" if n % 3 == 1 else "drop" if n % 5 == 2 else None

    waves = _waves(12)
    with VerlOmniProtocolServer(faults) as server:
        async with AsyncScorerClient(server.url + "/score", max_retries=6, chunk_size=4, **FAST) as client:
            results = await client.score_many([(w, 24_000, "target text") for w in waves])
            single = await client.score(waves[0], 24_000, "target text")
    assert all(isinstance(r, ScoreResult) for r in results), results
    assert [r.score for r in results] == [expected_score(w) for w in waves]
    assert single.score == expected_score(waves[0])
    assert server.scored == 13  # each item scored exactly once, however many attempts it took
    assert server.paths["POST /score"] > 13 and "POST /v1/score/batch" not in server.paths


async def test_a_slow_answer_times_out_and_is_retried() -> None:
    with VerlOmniProtocolServer(lambda n: "slow" if n == 1 else None, slow_s=3.0) as server:
        async with AsyncScorerClient(server.url + "/score", max_retries=2, backoff=0.0, timeout=1.0) as client:
            result = await client.score(_waves(1)[0], 16_000, "x")
    assert result.score == expected_score(_waves(1)[0]) and server.paths["POST /score"] == 2


async def test_its_400_is_final_and_keeps_the_servers_message() -> None:
    with VerlOmniProtocolServer() as server:
        async with AsyncScorerClient(server.url + "/score", max_retries=3, **FAST) as client:
            with pytest.raises(RequestRejectedError) as info:
                await client.score(_waves(1)[0], 16_000, "   ")
    assert info.value.status == 400 and "non-empty prompt" in info.value.message
    assert server.paths == {"GET /v1/info": 1, "POST /score": 1}


async def test_compute_score_is_a_drop_in_for_its_server_url() -> None:
    wave = _waves(1)[0]
    with VerlOmniProtocolServer(lambda n: "503" if n == 1 else None) as server:
        out = await compute_score(
            (wave, 24_000),
            "target text",
            {"id": "sample-1", "audio": wave},
            server_url=server.url + "/score",
            max_retries=2,
            retry_backoff=0.0,
        )
        await close_cached_clients()
    assert out == {"score": expected_score(wave), "cer": 0.0, "asr_text": "target text", "sample_id": "sample-1"}
    assert server.paths == {"GET /v1/info": 1, "POST /score": 2}


def test_sync_client_reaches_it_too() -> None:
    with VerlOmniProtocolServer() as server, ScorerClient(server.url + "/score", **FAST) as client:
        results = client.score_many([(w, 16_000, "x") for w in _waves(5)])
    assert len(results) == 5 and all(isinstance(r, ScoreResult) for r in results)
    assert server.paths == {"GET /v1/info": 1, "POST /score": 5}


async def test_a_base_url_gets_v1_score() -> None:
    # A base URL means an audio-reward server: it is sent /v1/score, which this server does not have.
    with VerlOmniProtocolServer() as server:
        async with AsyncScorerClient(server.url, **FAST) as client:
            with pytest.raises(RequestRejectedError) as info:
                await client.score(_waves(1)[0], 16_000, "x")
    assert info.value.status == 404 and server.paths == {"GET /v1/info": 1, "POST /v1/score": 1}


async def test_an_audio_reward_server_gets_batches_at_its_root_or_its_score_url() -> None:
    waves = _waves(6)
    for suffix in ("", "/score", "/v1/score"):
        with FaultServer() as server:
            async with AsyncScorerClient(server.url + suffix, chunk_size=3, **FAST) as client:
                results = await client.score_many([(w, 16_000, "x") for w in waves])
                await client.score(waves[0], 16_000, "x")
        assert all(isinstance(r, ScoreResult) for r in results)
        assert server.http_requests["batch"] == 2 and server.http_requests["single"] == 1, suffix
