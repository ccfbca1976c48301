"""verl's ``AudioScoreRewardManager`` owns its scorer client: one per event loop, closed with that loop or by it."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.testkit import speech
from tests.testkit.fault_server import FaultServer, expected_score

pytestmark = pytest.mark.verl


def _manager(url: str) -> Any:
    pytest.importorskip("verl.experimental.reward_loop.reward_manager.base",
                        reason="needs verl: the trainer environment (scripts/envs/verl.sh)")
    from omegaconf import OmegaConf

    from audio_reward.trainer_plugin.reward_manager import AudioScoreRewardManager

    return AudioScoreRewardManager(OmegaConf.create({"reward": {"audio_reward": {"server_url": url}}}),
                                   tokenizer=None)


def test_one_client_per_loop_closed_when_the_loop_ends() -> None:
    with FaultServer() as server:
        manager = _manager(server.url)

        async def first() -> Any:
            scorer = await manager.scorer()
            assert await manager.scorer() is scorer  # one per loop, reused by every sample
            result = await scorer.client.score(speech.tone(0.25, hz=440), 16000, "x", request_id="r1")
            assert result.score == expected_score("r1") and server.scored["r1"] == 1
            return scorer

        old = asyncio.run(first())
        assert old.client.closed  # the loop's shutdown closed it: nothing is left open

        async def second() -> Any:
            scorer = await manager.scorer()
            assert scorer is not old and scorer.client is not old.client and not scorer.client.closed
            await manager.aclose()
            assert scorer.client.closed
            return scorer

        asyncio.run(second())
