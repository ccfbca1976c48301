"""The reward path of verl's v1 trainer, with verl 0.9.1's real classes and a real scorer on loopback.

What runs, as in a ``main_omni`` run (verl-omni forces ``trainer.use_v1``):
verl's ``AgentLoopWorkerTQ._run_prompt`` (the TransferQueue agent-loop worker,
run in this process) drives verl's ``SingleTurnAgentLoop`` against a stub
rollout server that answers the way verl-omni's Qwen3-TTS rollout does (a 1-D
float waveform tensor and an int ``audio_sample_rate`` of 24000 in the
output's extra fields, beside the talker replay record); the worker's
``_compute_score`` sends each rollout to real ``RewardLoopWorker`` Ray actors
running :class:`AudioScoreRewardManager` with the recipe's reward overrides
(``recipes/launch.py``), which score it on a real ``audio-reward serve``
(Whisper tiny.en).  Trajectories land in a real TransferQueue; the recipe's
fail-closed sampler (:mod:`audio_reward.trainer_plugin.fail_closed`) samples
them as the trainer would.

The config is verl's ``ppo_trainer`` plus the recipe's ``reward.*`` and
``trainer.v1.sampler.*`` overrides: verl-omni does not install here, and its
``omni_trainer`` adds nothing on this path (``test_launch_contract.py``
composes the full recipe against a verl-omni checkout).
"""

# ruff: noqa: E402 - the imports below need verl, Ray, torch and TransferQueue, which pytest.importorskip checks first

from __future__ import annotations

import asyncio
import importlib
import json
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

verl = pytest.importorskip("verl")
ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")
tq = pytest.importorskip("transfer_queue")

import soundfile as sf
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf
from verl.experimental.agent_loop.agent_loop import get_trajectory_info
from verl.experimental.reward_loop.reward_loop import RewardLoopManager
from verl.trainer.ppo import core_algos
from verl.trainer.ppo.v1.agent_loop_tq import AgentLoopWorkerTQ
from verl.trainer.ppo.v1.replay_buffer import ReplayBufferAsync
from verl.workers.rollout.replica import TokenOutput

from audio_reward.trainer_plugin import register_with_verl
from audio_reward.trainer_plugin.fail_closed import (
    FailClosedReplayBuffer,
    RewardFailureError,
)
from audio_reward.trainer_plugin.recipes.launch import plan
from audio_reward.trainer_plugin.validation_log import ValidationLogger
from tests.testkit.speech import synth_speech

pytestmark = pytest.mark.verl

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Please call Stella and ask her to bring these things."]
WRONG = "Completely different words were spoken here today."
N = 3  # GRPO group size
NAN = "<nan>"
REPLAY_KEY = "qwen3_tts_talker_replay"
"""verl-omni's Qwen3-TTS rollout keeps the talker replay record under this extra field beside the audio."""
DOC = Path(__file__).resolve().parents[3] / "docs" / "training.md"
VERL_OMNI_SRC = Path(os.environ.get("VERL_OMNI_SRC", "/nonexistent"))
AUDIO_MANAGER = Path("verl_omni/reward_loop/reward_manager/audio.py")
"""verl-omni's ``AudioRewardManager`` (way (b)); it imports verl only."""


def _verl_omni_namespace(root: Path) -> Path | None:
    """A path entry under which ``verl_omni.reward_loop.reward_manager.audio`` imports without the package
    ``__init__`` files (they import diffusers and vLLM, which do not install on a CPU machine): the checkout's
    file, linked into folders without ``__init__.py``.  None when ``VERL_OMNI_SRC`` has no such file."""
    source = VERL_OMNI_SRC / AUDIO_MANAGER
    if not source.is_file():
        return None
    (root / AUDIO_MANAGER).parent.mkdir(parents=True)
    (root / AUDIO_MANAGER).symlink_to(source)
    return root


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Llama config + word-level tokenizer with a chat template: what the agent loop worker loads."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, PreTrainedTokenizerFast

    vocab = {"<pad>": 0, "<eos>": 1, "<unk>": 2, **{f"w{i}": i + 3 for i in range(16)}}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", unk_token="<unk>")
    fast.chat_template = "{% for m in messages %}{{ m['content'] }} {% endfor %}"
    path = tmp_path_factory.mktemp("tiny-model")
    fast.save_pretrained(path)
    LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1, num_attention_heads=2,
                num_key_value_heads=1, bos_token_id=1, eos_token_id=1, pad_token_id=0,
                architectures=["LlamaForCausalLM"]).save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def verl_omni_path(tmp_path_factory: pytest.TempPathFactory) -> Path | None:
    return _verl_omni_namespace(tmp_path_factory.mktemp("verl-omni-namespace"))


@pytest.fixture(scope="module")
def cluster(verl_omni_path: Path | None) -> Iterator[None]:
    saved = os.environ.get("PYTHONPATH")
    if verl_omni_path is not None:  # the reward actors inherit the environment Ray starts with
        os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(verl_omni_path), saved) if p)
        sys.path.insert(0, str(verl_omni_path))
    # Logical CPUs for TransferQueue's controller and storage unit and the reward actors; they mostly wait.
    ray.init(num_cpus=6, include_dashboard=False, log_to_driver=False, ignore_reinit_error=True)
    tq.init(OmegaConf.create({"backend": {"SimpleStorage": {"num_data_storage_units": 1}}}))
    try:
        yield
    finally:
        tq.close() if hasattr(tq, "close") else None
        ray.shutdown()
        if saved is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = saved


class StubTTSRollout:
    """Answers ``generate`` the way verl-omni's Qwen3-TTS rollout fills the agent loop's extra fields.

    The prompt's single word ``w<k>`` selects the target text ``TEXTS[k]``; the
    i-th call for a prompt speaks ``spoken[k][i]``: a text, ``NAN`` for a
    waveform with a NaN sample (the rollout itself refuses an empty one), or
    ``None`` for an output without audio.
    """

    def __init__(self, spoken: dict[int, list[str | None]]) -> None:
        self.spoken = spoken
        self.calls: dict[int, int] = {}

    async def generate(self, *, prompt_ids: list[int], **_: Any) -> TokenOutput:
        k = prompt_ids[0] - 3
        i = self.calls.get(k, 0)
        self.calls[k] = i + 1
        said = self.spoken[k][i]
        frames = 5 + i
        fields: dict[str, Any] = {REPLAY_KEY: {"text_ids": [3, 4, 5], "audio_codes": torch.zeros(frames, 16,
                                                                                               dtype=torch.long)}}
        if said is not None:
            wave, rate = synth_speech(TEXTS[k] if said == NAN else said)
            if said == NAN:
                wave = wave.copy()
                wave[len(wave) // 2] = np.nan
            fields.update(audio=torch.from_numpy(wave).float().reshape(-1), audio_sample_rate=int(rate))
        return TokenOutput(token_ids=[4 + j % 8 for j in range(frames)], log_probs=[-0.5] * frames,
                           stop_reason="completed", extra_fields=fields)


def recipe_env(tmp: Path, model_dir: Path, url: str) -> dict[str, str]:
    (tmp / "train.parquet").touch()
    (tmp / "val.parquet").touch()
    (tmp / "voice.json").write_text(json.dumps([0.1] * 8))
    return {
        "MODEL_PATH": str(model_dir),
        "TRAIN_FILE": str(tmp / "train.parquet"),
        "VAL_FILE": str(tmp / "val.parquet"),
        "SPK_EMBED_PATH": str(tmp / "voice.json"),
        "AUDIO_REWARD_URL": url,
        "OUTPUT_DIR": str(tmp / "run"),
    }


def v1_config(env: dict[str, str], model_dir: Path, extra: list[str] = (), reward: list[str] | None = None) -> Any:
    """verl's ppo_trainer with the recipe's reward and sampler overrides (or ``reward``), sized for this test."""
    recipe = reward if reward is not None else [
        o
        for o in plan("qwen3_tts_grpo", environ=env).overrides
        if o.lstrip("+").startswith(("reward.", "trainer.v1.sampler."))
    ]
    config_dir = Path(verl.__file__).parent / "trainer" / "config"
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[
                *recipe,
                f"actor_rollout_ref.model.path={model_dir}",
                f"actor_rollout_ref.rollout.n={N}",
                "actor_rollout_ref.rollout.name=vllm",
                "data.max_prompt_length=16",
                "data.max_response_length=16",
                "reward.num_workers=2",
                "++reward.audio_reward.max_retries=0",
                *extra,
            ],
        )


class V1Run:
    """Submit prompts the way the v1 trainer does, run them through the TQ worker, sample like the trainer."""

    def __init__(self, config: Any, rollout: StubTTSRollout) -> None:
        self.config = config
        self.rewards = RewardLoopManager(config)
        worker_cls = AgentLoopWorkerTQ.__ray_actor_class__
        self.worker = worker_cls(
            config, llm_client=rollout, reward_loop_worker_handles=self.rewards.reward_loop_worker_handles
        )

    def run(self, prompts: list[int], *, partition: str = "train", step: int = 1) -> list[str]:
        uids = [f"{partition}{step}p{k}" for k in prompts]
        validate = partition == "val"
        split = "val" if validate else "train"
        tq.kv_batch_put(
            keys=uids,
            partition_id=partition,
            tags=[{"is_prompt": True, "status": "pending", "global_steps": step} for _ in uids],
        )

        async def go() -> None:
            trajectories = await get_trajectory_info(step, prompts, validate)
            await asyncio.gather(
                *(
                    self.worker._run_prompt(
                        {
                            "uid": uid,
                            "agent_name": "single_turn_agent",
                            "raw_prompt": [{"role": "user", "content": f"w{k}"}],
                            "data_source": "tts_cer",
                            "reward_model": {"style": "model", "ground_truth": TEXTS[k]},
                            "extra_info": {"index": str(k), "split": split, "text": TEXTS[k]},
                            "index": k,
                            "global_steps": step,
                        },
                        {"temperature": 1.0, "top_p": 1.0, "top_k": -1, "logprobs": True},
                        trajectory=trajectory,
                    )
                    for uid, k, trajectory in zip(uids, prompts, trajectories, strict=True)
                )
            )

        asyncio.run(go())
        return uids

    def sampler(self, cls: type = FailClosedReplayBuffer, refills: list[int] | None = None) -> Any:
        sampler = self.config.trainer.v1.sampler
        return cls(
            trainer_mode="omni_sync",
            trainer_config={},
            max_off_policy_threshold=None,
            max_off_policy_strategy="drop",
            sampler_kwargs=sampler.sampler_kwargs,
            poll_interval=0.05,
            refill_fn=(refills.append if refills is not None else None),
        )

    def close(self) -> None:
        for actor in self.rewards.reward_loop_workers:
            ray.kill(actor)
        for partition, items in (tq.kv_list() or {}).items():
            if items:
                tq.kv_clear(partition_id=partition, keys=list(items))


def fetch(batch: Any) -> tuple[list[str], torch.Tensor, list[dict[str, Any]]]:
    """uids, per-sample rewards and reward_extra_info of a sampled batch."""
    data = tq.kv_batch_get(
        keys=batch.keys, partition_id=batch.partition_id, select_fields=["rm_scores", "extra_fields"]
    )
    scores = torch.stack([s.sum() for s in data["rm_scores"]])
    extra = [getattr(e, "data", e)["reward_extra_info"] for e in data["extra_fields"]]
    return [k.split("_")[0] for k in batch.keys], scores, extra


@pytest.fixture
def make_run(tmp_path: Path, model_dir: Path, cluster: None) -> Iterator[Any]:
    runs: list[V1Run] = []

    def make(url: str, spoken: dict[int, list[str | None]], extra: list[str] = (),
             reward: list[str] | None = None) -> tuple[V1Run, Path]:
        env = recipe_env(tmp_path, model_dir, url)
        run = V1Run(v1_config(env, model_dir, list(extra), reward), StubTTSRollout(spoken))
        runs.append(run)
        return run, Path(env["OUTPUT_DIR"])

    yield make
    for run in runs:
        run.close()


def test_rewards_stream_through_the_v1_agent_loop_into_grpo(make_run: Any, scorer_url: str) -> None:
    run, _ = make_run(scorer_url, {0: [TEXTS[0], WRONG, TEXTS[0]], 1: [TEXTS[1], TEXTS[1], WRONG]})
    run.run([0, 1])
    batch, metrics = run.sampler().sample(global_steps=1, partition_id="train", batch_size=2)
    uids, scores, extra = fetch(batch)
    assert len(uids) == 2 * N and not metrics
    # the same keys for every sample (verl takes the key set from the first)
    assert all(sorted(e) == ["cer", "duration_ratio", "duration_s", "score_failed", "wer"] for e in extra)
    cer = np.array([e["cer"] for e in extra])
    assert (np.sort(cer)[:4] < 0.1).all() and (np.sort(cer)[4:] > 0.3).all()
    assert all(e["score_failed"] == 0.0 for e in extra)
    good, bad = cer < 0.1, cer > 0.3
    assert scores[torch.from_numpy(good)].min() > scores[torch.from_numpy(bad)].max() + 0.3

    # verl's own GRPO over the streamed rewards: each group's wrong utterance gets the negative advantage.
    rewards = torch.zeros(len(uids), 4)
    rewards[:, -1] = scores
    adv, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=rewards, response_mask=torch.ones(len(uids), 4), index=np.array(uids, dtype=object)
    )
    assert (adv[torch.from_numpy(good), 0] > 0).all() and (adv[torch.from_numpy(bad), 0] < 0).all()


def test_verl_alone_trains_on_after_a_reward_failure(make_run: Any, scorer_url: str) -> None:
    """The behaviour the fail-closed sampler exists for: verl's own buffer evicts the group and refills."""
    run, _ = make_run(scorer_url, {0: [TEXTS[0], NAN, TEXTS[0]], 1: [TEXTS[1]] * N})
    run.run([0, 1])
    refills: list[int] = []
    batch, metrics = run.sampler(ReplayBufferAsync, refills).sample(global_steps=1, partition_id="train", batch_size=1)
    assert refills == [1] and metrics == {"training/rollout_failure/evicted_samples": 1}
    assert {k.split("_")[0] for k in batch.keys} == {"train1p1"}


def test_raise_stops_the_run_naming_the_sample(make_run: Any, scorer_url: str) -> None:
    run, out = make_run(scorer_url, {0: [TEXTS[0], NAN, TEXTS[0]], 1: [TEXTS[1]] * N})
    run.run([0, 1])
    with pytest.raises(RewardFailureError) as err:
        run.sampler().sample(global_steps=1, partition_id="train", batch_size=2)
    message = str(err.value)
    assert "1 GRPO group(s) failed (max_failed_groups=0)" in message
    assert "uid=train1p0: scoring sample index=0 uid=train1p0 (target text 'The quick brown fox" in message
    assert "audio holds 1 NaN or infinite samples" in message
    assert json.loads((out / "reward_failures.jsonl").read_text().splitlines()[0])["uid"] == "train1p0"


def test_a_tolerated_failure_is_counted_then_the_next_stops(make_run: Any, scorer_url: str) -> None:
    run, _ = make_run(
        scorer_url,
        {0: [NAN, TEXTS[0], TEXTS[0]], 1: [TEXTS[1], NAN, TEXTS[1]]},
        ["++trainer.v1.sampler.sampler_kwargs.max_failed_groups=1"],
    )
    run.run([0])
    sampler = run.sampler()
    sampler._sync_metadata_from_transfer_queue()  # one failed group: tolerated
    assert list(sampler.failed_groups) == ["train1p0"]
    run.run([1])
    with pytest.raises(RewardFailureError, match=r"2 GRPO group\(s\) failed \(max_failed_groups=1\)"):
        sampler._sync_metadata_from_transfer_queue()


def test_missing_audio_stops_even_under_mask(make_run: Any, scorer_url: str) -> None:
    run, _ = make_run(
        scorer_url,
        {0: [TEXTS[0], None, TEXTS[0]]},
        ["reward.audio_reward.failure_policy=mask", "algorithm.adv_estimator=grpo_masked"],
    )
    run.run([0])
    with pytest.raises(RewardFailureError, match=r"uid=train1p0: no audio: expected 'audio'"):
        run.sampler().sample(global_steps=1, partition_id="train", batch_size=1)


def test_mask_masks_the_failed_sample_out_of_grpo(make_run: Any, scorer_url: str) -> None:
    register_with_verl()
    run, _ = make_run(
        scorer_url,
        {0: [TEXTS[0], NAN, WRONG]},
        ["reward.audio_reward.failure_policy=mask", "algorithm.adv_estimator=grpo_masked"],
    )
    run.run([0])
    batch, _ = run.sampler().sample(global_steps=1, partition_id="train", batch_size=1)
    uids, scores, extra = fetch(batch)
    failed = np.array([e["score_failed"] for e in extra]) == 1.0
    assert failed.sum() == 1 and math.isnan(scores[torch.from_numpy(failed)].item())
    assert torch.isfinite(scores[torch.from_numpy(~failed)]).all()
    rewards = torch.zeros(N, 4)
    rewards[:, -1] = scores
    mask = torch.ones(N, 4)
    adv, _ = core_algos.get_adv_estimator_fn("grpo_masked")(
        token_level_rewards=rewards, response_mask=mask, index=np.array(uids, dtype=object), config=None
    )
    ok = torch.from_numpy(~failed)
    ref, _ = core_algos.compute_grpo_outcome_advantage(
        token_level_rewards=rewards[ok], response_mask=torch.ones(2, 4), index=np.array(uids, dtype=object)[~failed]
    )
    assert torch.allclose(adv[ok], ref) and torch.count_nonzero(adv[~ok]) == 0 and mask[~ok].sum() == 0


def test_validation_step_writes_the_recipe_artifacts(make_run: Any, scorer_url: str, tmp_path: Path) -> None:
    reference = tmp_path / "reference.wav"
    wave, rate = synth_speech("This is the voice of the run.")
    sf.write(reference, wave, rate)
    run, out = make_run(
        scorer_url,
        {0: [TEXTS[0]], 1: [WRONG]},
        [
            "actor_rollout_ref.rollout.val_kwargs.n=1",
            f"+reward.audio_reward.reference_audio={reference}",
            "++reward.audio_reward.validation_max_wavs=4",
        ],
    )
    run.run([0, 1], partition="val", step=20)
    batch, _ = run.sampler().sample(global_steps=20, partition_id="val", batch_size=2)
    assert len(batch.keys) == 2
    logger = ValidationLogger(out / "validation_audio")
    (step,) = logger.passes()
    assert step.name == "step_000020" and logger.problems() == []
    assert sorted(p.name for p in step.glob("*.wav")) == ["reference.wav", "sample_000.wav", "sample_001.wav"]
    metrics = logger.metrics(step)
    assert metrics["count"] == 2 and metrics["policy_loss"] is None and metrics["kl_loss"] is None
    assert 0.3 < metrics["mean_cer"] < 2.0 and metrics["mean_reward"] == pytest.approx(metrics["mean"]["score"])
    assert metrics["mean_duration_ratio"] > 0


def test_mask_refuses_estimators_that_would_read_nan(tmp_path: Path, model_dir: Path, scorer_url: str) -> None:
    from audio_reward.trainer_plugin.reward_manager import AudioScoreRewardManager

    config = v1_config(
        recipe_env(tmp_path, model_dir, scorer_url),
        model_dir,
        ["reward.audio_reward.failure_policy=mask", "algorithm.adv_estimator=grpo"],
    )
    with pytest.raises(ValueError, match="grpo_masked"):
        AudioScoreRewardManager(config, tokenizer=None)


def way_b_lines(url: str) -> list[str]:
    """Way (b)'s launch lines as docs/training.md gives them (section 5), the scorer's URL put in."""
    text = DOC.read_text(encoding="utf-8")
    lines: list[str] = []
    for line in text[text.index("**(b) verl-omni's `AudioRewardManager`"):].splitlines():
        if line.startswith("    "):
            lines.append(line.strip().replace("http://scorer:8000", url))
        elif lines:
            break
    return lines


def _sampler_class(config: Any) -> type:
    custom = config.trainer.v1.sampler.custom_sampler
    return getattr(importlib.import_module(custom.path.removeprefix("pkg://")), custom.name)


def _way_b(url: str, verl_omni_path: Path | None) -> list[str]:
    if verl_omni_path is None:
        pytest.skip(f"VERL_OMNI_SRC={VERL_OMNI_SRC} has no {AUDIO_MANAGER} (verl-omni's Qwen3-TTS GRPO example)")
    lines = way_b_lines(url)
    assert "reward.reward_manager.name=AudioRewardManager" in lines and any("FailClosed" in o for o in lines)
    return [*lines, "+reward.custom_reward_function.reward_kwargs.max_retries=0"]


def test_way_b_scores_through_verl_omni_s_manager(make_run: Any, scorer_url: str,
                                                  verl_omni_path: Path | None) -> None:
    run, _ = make_run(scorer_url, {0: [TEXTS[0], WRONG, TEXTS[0]]}, reward=_way_b(scorer_url, verl_omni_path))
    assert _sampler_class(run.config) is FailClosedReplayBuffer
    run.run([0])
    batch, _ = run.sampler().sample(global_steps=1, partition_id="train", batch_size=1)
    _, scores, extra = fetch(batch)
    cer = np.array([e["cer"] for e in extra])
    assert len(scores) == N and scores[torch.from_numpy(cer < 0.1)].min() > scores[torch.from_numpy(cer > 0.3)].max()


def test_way_b_stops_on_a_scorer_failure(make_run: Any, dead_url: str, verl_omni_path: Path | None) -> None:
    run, _ = make_run(dead_url, {1: [TEXTS[1]] * N}, reward=_way_b(dead_url, verl_omni_path))
    run.run([1])
    with pytest.raises(RewardFailureError, match=r"1 GRPO group\(s\) failed \(max_failed_groups=0\)") as err:
        run.sampler(_sampler_class(run.config)).sample(global_steps=1, partition_id="train", batch_size=1)
    assert "uid=train1p1" in str(err.value)
