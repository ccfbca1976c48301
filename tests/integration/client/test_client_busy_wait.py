"""``wait_while_busy``: a client that can only wait for its answers (a trainer) waits as long as the scorer answers.

Against a scripted server on loopback, then against the real scorer's early refusal under more load than its
request timeout allows, which is what a trainer's own reward burst meets (issue 36).
"""

from __future__ import annotations

import asyncio
import time

import numpy as np
import pytest

from audio_reward.scorer_client import (
    AsyncScorerClient,
    DeadlineExceededError,
    ScorerUnavailableError,
)
from audio_reward.trainer_plugin.settings import PluginSettings
from tests.testkit.fault_server import Drop, FaultServer, Seen, Status, always_score
from tests.testkit.instant_engine import clip, prompt_of
from tests.testkit.server import running_server

FAST = {"backoff": 0.01, "backoff_max": 0.05, "timeout": 5.0}


def busy_for(n: int, fault: object):  # the fault server's policies are untyped
    def policy(seen: Seen):
        return fault if seen.attempt <= n else always_score(seen)
    return policy


async def test_busy_answers_spend_no_retry_when_waiting_while_busy(fault_server: FaultServer,
                                                                   tone: np.ndarray) -> None:
    fault_server.policy = busy_for(6, Status(429, code="overloaded", retry_after="0.02"))
    async with AsyncScorerClient(fault_server.url, max_retries=1, **FAST) as client:
        with pytest.raises(ScorerUnavailableError):  # the default: each 429 spends a retry
            await client.score(tone, 16000, "hello", request_id="plain")
    assert fault_server.received["plain"] == 2
    async with AsyncScorerClient(fault_server.url, max_retries=1, wait_while_busy=True, **FAST) as client:
        result = await client.score(tone, 16000, "hello", request_id="patient")
    assert result.request_id == "patient" and fault_server.received["patient"] == 7


async def test_a_scorer_that_does_not_answer_still_spends_retries(fault_server: FaultServer,
                                                                  tone: np.ndarray) -> None:
    fault_server.policy = busy_for(6, Drop())
    async with AsyncScorerClient(fault_server.url, max_retries=2, wait_while_busy=True, **FAST) as client:
        with pytest.raises(ScorerUnavailableError) as info:
            await client.score(tone, 16000, "hello", request_id="dropped")
    assert info.value.attempts == 3 and fault_server.received["dropped"] == 3


async def test_the_deadline_still_bounds_the_wait(fault_server: FaultServer, tone: np.ndarray) -> None:
    fault_server.policy = lambda seen: Status(503, code="overloaded", retry_after="0.05")
    async with AsyncScorerClient(fault_server.url, max_retries=0, wait_while_busy=True, deadline=0.6,
                                 **FAST) as client:
        started = time.monotonic()
        with pytest.raises(DeadlineExceededError):
            await client.score(tone, 16000, "hello")
    assert 0.5 <= time.monotonic() - started < 2.0
    assert fault_server.received and max(fault_server.received.values()) > 3


def test_the_trainer_plugin_waits_while_busy_unless_told_not_to(monkeypatch: pytest.MonkeyPatch) -> None:
    assert PluginSettings(server_url="http://127.0.0.1:9").client.wait_while_busy
    assert not PluginSettings(server_url="http://127.0.0.1:9", wait_while_busy=False).client.wait_while_busy
    monkeypatch.setenv("AUDIO_REWARD_CLIENT_WAIT_WHILE_BUSY", "false")  # the client's own variable decides
    assert not PluginSettings(server_url="http://127.0.0.1:9").client.wait_while_busy


async def test_a_scorer_that_times_out_every_time_still_spends_retries(fault_server: FaultServer,
                                                                      tone: np.ndarray) -> None:
    """A hung engine answers 504 with nothing finished, for ever: that is no "not now", it spends retries."""
    fault_server.policy = lambda seen: Status(504, code="timeout")
    async with AsyncScorerClient(fault_server.url, max_retries=2, wait_while_busy=True, **FAST) as client:
        with pytest.raises(ScorerUnavailableError) as info:
            await client.score(tone, 16000, "hello", request_id="hung")
    assert info.value.attempts == 3 and fault_server.received["hung"] == 3


async def test_a_trainer_burst_past_the_scorers_limits_is_all_scored() -> None:
    """The real scorer answers "not now" to what it cannot finish within its request timeout (429 at
    admission, or 504 for the items unfinished at the timeout); the plugin's client, with its settings as the
    trainer builds them and no retry to spend, gets every item scored, where a plain client gives up."""
    clips = [(clip(i, 0.5), 16000, prompt_of(i)) for i in range(48)]
    burst = {"chunk_size": 4, "concurrency": 12, **FAST}
    with running_server(instant=True, delay_ms=250, max_batch_size=4, request_timeout_s=2) as scorer:
        async with AsyncScorerClient(scorer.url, max_retries=0, **burst) as plain:
            await plain.score_many(clips[:4])  # the scorer measures its throughput on a first batch
            outcomes = await plain.score_many(clips)
        refused = [str(o) for o in outcomes if isinstance(o, ScorerUnavailableError)]
        # "not now" answers: 429 (refused early) or the request timeout's 504 for what did not finish in time
        assert refused and all("overloaded" in e or "timeout" in e for e in refused), refused[:3]
        await asyncio.sleep(2.5)  # the refused requests' turns pass
        settings = PluginSettings(server_url=scorer.url, max_retries=0, **burst)
        async with AsyncScorerClient(settings=settings.client) as trainer:
            outcomes = await trainer.score_many(clips)
    assert [getattr(o, "score", None) for o in outcomes] == [1.0] * len(clips), outcomes[:3]
