"""AudioScoreRewardManager inside verl 0.9.1's real RewardLoopManager (Ray actors), real scorer on loopback.

Runs in the verl environment (scripts/envs/verl.sh); skipped where verl is not importable.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pytest

verl = pytest.importorskip("verl")
ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")

from hydra import compose, initialize_config_dir  # noqa: E402
from verl import DataProto  # noqa: E402
from verl.experimental.reward_loop.reward_loop import RewardLoopManager  # noqa: E402
from verl.trainer.ppo import core_algos  # noqa: E402

from audio_reward.trainer_plugin.recipes import config_dir  # noqa: E402
from audio_reward.trainer_plugin.validation_log import ValidationLogger  # noqa: E402
from support.speech import synth_speech  # noqa: E402

pytestmark = pytest.mark.verl

TEXTS = [
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things.",
]
WRONG = "Completely different words were spoken here today."


@pytest.fixture(scope="module")
def tokenizer_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny word-level tokenizer saved as a Hugging Face tokenizer folder (the worker loads one by path)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"w{i}": i + 3 for i in range(16)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    path = tmp_path_factory.mktemp("tokenizer")
    fast.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def ray_cluster() -> Iterator[None]:
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    try:
        yield
    finally:
        ray.shutdown()


def recipe_config(overrides: list[str]) -> Any:
    with initialize_config_dir(config_dir=str(config_dir("qwen3_tts_grpo")), version_base=None):
        return compose(config_name="qwen3_tts_grpo", overrides=overrides)


def rollout_batch(group: list[tuple[str, str]], uids: list[str]) -> DataProto:
    """A batch as the TTS agent loop leaves it: tokens, plus audio in non_tensor_batch (target, spoken) pairs."""
    n, prompt_len, resp_len = len(group), 4, 6
    prompts = torch.randint(3, 19, (n, prompt_len))
    responses = torch.randint(3, 19, (n, resp_len))
    lengths = [resp_len - (i % 3) for i in range(n)]
    attention = torch.ones(n, prompt_len + resp_len, dtype=torch.long)
    for i, length in enumerate(lengths):
        attention[i, prompt_len + length :] = 0
    audio = np.empty(n, dtype=object)
    rates = np.empty(n, dtype=object)
    for i, (_, spoken) in enumerate(group):
        audio[i], rates[i] = synth_speech(spoken)
    return DataProto.from_dict(
        tensors={"prompts": prompts, "responses": responses, "attention_mask": attention,
                 "input_ids": torch.cat([prompts, responses], 1)},
        non_tensors={
            "audio": audio,
            "audio_sample_rate": rates,
            "data_source": np.array(["tts_cer"] * n, dtype=object),
            "reward_model": np.array([{"style": "model", "ground_truth": t} for t, _ in group], dtype=object),
            "extra_info": np.array([{"index": str(i), "split": "train"} for i in range(n)], dtype=object),
            "uid": np.array(uids, dtype=object),
        },
    ), lengths


def test_rewards_from_real_reward_loop_feed_verl_grpo(scorer_url: str, tokenizer_dir: Path, ray_cluster: None) -> None:
    # Two GRPO groups of 3: in each, two rollouts say the text and one says something else.
    group = [(TEXTS[0], TEXTS[0]), (TEXTS[0], WRONG), (TEXTS[0], TEXTS[0]),
             (TEXTS[1], TEXTS[1]), (TEXTS[1], TEXTS[1]), (TEXTS[1], WRONG)]
    uids = ["g0"] * 3 + ["g1"] * 3
    config = recipe_config([
        f"actor_rollout_ref.model.path={tokenizer_dir}",
        f"reward.audio_reward.server_url={scorer_url}",
        "reward.num_workers=2",
        "actor_rollout_ref.rollout.n=3",
        "algorithm.adv_estimator=grpo",
    ])
    data, lengths = rollout_batch(group, uids)
    manager = RewardLoopManager(config)
    out = manager.compute_rm_score(data)

    rm_scores = out.batch["rm_scores"]
    scores = rm_scores.sum(-1)
    # The reward sits on each response's last valid token, nowhere else.
    for i, length in enumerate(lengths):
        assert rm_scores[i, length - 1] == scores[i] and torch.count_nonzero(rm_scores[i]) <= 1
    assert out.meta_info["reward_extra_keys"] == ["cer", "wer", "duration_s", "duration_ratio", "score_failed"]
    cer = out.non_tensor_batch["cer"].astype(float)
    good, bad = [0, 2, 3, 4], [1, 5]
    assert (cer[good] < 0.1).all() and (cer[bad] > 0.3).all()
    assert (out.non_tensor_batch["score_failed"] == 0).all()
    assert scores[good].min() > scores[bad].max() + 0.3

    response_mask = data.batch["attention_mask"][:, 4:]
    adv, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=rm_scores, response_mask=response_mask, index=np.array(uids, dtype=object)
    )
    seq_adv = adv[:, 0]
    assert (seq_adv[good] > 0).all() and (seq_adv[bad] < 0).all()
    # Advantages are constant over each response's valid tokens and zero past them.
    assert torch.equal(adv != 0, (response_mask.bool() & (seq_adv[:, None] != 0)))


def test_mask_policy_keeps_failed_samples_out_of_grpo(scorer_url: str, dead_url: str, tokenizer_dir: Path,
                                                       ray_cluster: None) -> None:
    group = [(TEXTS[0], TEXTS[0]), (TEXTS[0], WRONG), (TEXTS[0], TEXTS[0])]
    base = [f"actor_rollout_ref.model.path={tokenizer_dir}", "reward.num_workers=1",
            "actor_rollout_ref.rollout.n=3", "reward.audio_reward.failure_policy=mask",
            "reward.audio_reward.max_retries=0", "algorithm.adv_estimator=grpo_masked"]
    data, _ = rollout_batch(group, ["g0"] * 3)
    ok = RewardLoopManager(recipe_config([*base, f"reward.audio_reward.server_url={scorer_url}"])).compute_rm_score(data)
    # The second sample's scoring fails (its server is down); the others are scored normally.
    failing = data[1:2]
    failed = RewardLoopManager(recipe_config([*base, f"reward.audio_reward.server_url={dead_url}"])).compute_rm_score(failing)
    assert failed.non_tensor_batch["score_failed"].tolist() == [1.0]
    assert math.isnan(failed.batch["rm_scores"].sum().item())

    rewards = ok.batch["rm_scores"].clone()
    rewards[1] = failed.batch["rm_scores"][0]
    response_mask = data.batch["attention_mask"][:, 4:].clone()
    index = np.array(["g0"] * 3, dtype=object)
    estimator = core_algos.get_adv_estimator_fn("grpo_masked")
    adv, _ = estimator(token_level_rewards=rewards, response_mask=response_mask, index=index, config=None)
    # Same as verl's GRPO over the two scored samples alone; the failed one gets nothing and leaves the loss.
    ref, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=ok.batch["rm_scores"][[0, 2]], response_mask=data.batch["attention_mask"][[0, 2], 4:],
        index=index[[0, 2]],
    )
    assert torch.allclose(adv[[0, 2]], ref)
    assert torch.count_nonzero(adv[1]) == 0 and torch.count_nonzero(response_mask[1]) == 0
    assert torch.isfinite(rewards).all()


def test_raise_policy_stops_the_step_naming_the_sample(dead_url: str, tokenizer_dir: Path, ray_cluster: None) -> None:
    config = recipe_config([f"actor_rollout_ref.model.path={tokenizer_dir}", "reward.num_workers=1",
                            f"reward.audio_reward.server_url={dead_url}", "reward.audio_reward.max_retries=0"])
    data, _ = rollout_batch([(TEXTS[1], TEXTS[1])], ["g0"])
    with pytest.raises(Exception, match=r"ScoringFailedError.*index=0 uid=g0 .*Please call Stella"):
        RewardLoopManager(config).compute_rm_score(data)


def test_mask_policy_refuses_estimators_that_would_read_nan(tokenizer_dir: Path, scorer_url: str) -> None:
    from audio_reward.trainer_plugin.reward_manager import AudioScoreRewardManager

    config = recipe_config([f"reward.audio_reward.server_url={scorer_url}", "reward.audio_reward.failure_policy=mask",
                            "algorithm.adv_estimator=grpo"])
    with pytest.raises(ValueError, match="grpo_masked"):
        AudioScoreRewardManager(config, tokenizer=None)


def test_validation_samples_write_wavs_and_metrics(scorer_url: str, tokenizer_dir: Path, ray_cluster: None,
                                                    tmp_path: Path) -> None:
    config = recipe_config([f"actor_rollout_ref.model.path={tokenizer_dir}", "reward.num_workers=1",
                            f"reward.audio_reward.server_url={scorer_url}",
                            f"reward.audio_reward.validation_dir={tmp_path}", "reward.audio_reward.validation_max_wavs=1"])
    data, _ = rollout_batch([(TEXTS[0], TEXTS[0]), (TEXTS[1], WRONG)], ["v0", "v1"])
    for row in data.non_tensor_batch["extra_info"]:
        row["split"] = "val"
    manager = RewardLoopManager(config)
    manager.compute_rm_score(data)
    manager.compute_rm_score(data)  # a second validation pass
    logger = ValidationLogger(tmp_path)
    passes = logger.passes()
    assert [p.name for p in passes] == ["pass_0000", "pass_0001"]
    for p in passes:
        metrics = logger.metrics(p)
        assert (metrics["count"], metrics["failed"], metrics["wavs"]) == (2, 0, 1)
        assert 0.3 < metrics["mean"]["cer"] < 2.0
        assert len(list(p.glob("sample_*.wav"))) == 1
