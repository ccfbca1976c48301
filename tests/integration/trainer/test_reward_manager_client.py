"""verl's ``AudioScoreRewardManager`` owns its scorer client: one per event loop, closed with that loop or by it."""

from __future__ import annotations

import asyncio
import math
from typing import Any

import numpy as np
import pytest

from tests.testkit import speech
from tests.testkit.fault_server import FaultServer, expected_score

pytestmark = pytest.mark.verl


def _manager(url: str, failure_policy: str = "raise", estimator: str = "grpo") -> Any:
    pytest.importorskip("verl.experimental.reward_loop.reward_manager.base",
                        reason="needs verl: the trainer environment (scripts/envs/verl.sh)")
    from omegaconf import OmegaConf

    from audio_reward.trainer_plugin.reward_manager import AudioScoreRewardManager

    return AudioScoreRewardManager(OmegaConf.create({
        "reward": {"audio_reward": {"server_url": url, "failure_policy": failure_policy}},
        "algorithm": {"adv_estimator": estimator},
    }), tokenizer=None)


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


def _rollout_with_extra_info(extra_info: Any, text: str | None = "the target text") -> Any:
    """One verl rollout with audio (and ``text`` to say, unless None), whose ``extra_info`` column holds
    ``extra_info``."""
    import torch
    from verl import DataProto

    column = np.empty(1, dtype=object)
    column[0] = extra_info
    target = {} if text is None else {"reward_model": np.array([{"ground_truth": text}], dtype=object)}
    return DataProto.from_dict(
        tensors={"responses": torch.ones(1, 4, dtype=torch.long)},
        non_tensors={
            **target,
            "extra_info": column,
            "tool_extra_fields": np.array([{"audio": torch.from_numpy(speech.tone(0.25, hz=440)),
                                            "audio_sample_rate": 16000}], dtype=object),
        },
    )


def test_a_rollout_whose_extra_info_is_no_mapping_fails_as_that_sample_naming_its_text() -> None:
    """Not a crash while naming the failed sample: the failure policy gets it, with the row's target text if any."""
    from audio_reward.trainer_plugin.remote_scorer import ScoringFailedError

    with FaultServer() as server:
        with pytest.raises(ScoringFailedError, match=r"target text 'the target text'.*extra_info must be a mapping"):
            asyncio.run(_manager(server.url).run_single(_rollout_with_extra_info("not a mapping")))
        masking = _manager(server.url, failure_policy="mask", estimator="grpo_masked")
        for rollout in (_rollout_with_extra_info(["no", "mapping"]), _rollout_with_extra_info(["no"], text=None)):
            masked = asyncio.run(masking.run_single(rollout))
            assert math.isnan(masked["reward_score"]) and masked["reward_extra_info"]["score_failed"] == 1.0
        assert not server.scored  # nothing was sent
