"""GRPO on codec-0 of a tiny random Qwen3-TTS, end to end on CPU, rewarded by a real scorer.

A Qwen3-TTS custom-voice model built from qwen-tts's own classes samples a
group of utterances for one text; the real 12 Hz speech tokenizer decodes
them to 24 kHz audio; a real ``audio-reward serve`` (Whisper tiny.en) scores
them; then one policy-gradient step runs on the talker's codec-0 log-probs,
as verl-omni's Qwen3-TTS recipe trains it (the code predictor frozen).

Runs in the TTS environment (``scripts/envs/tts.sh``; qwen-tts pins
transformers 4.57.3, so it cannot share verl's environment); skipped where
qwen-tts is not installed.  The server runs from ``AUDIO_REWARD_TEST_SERVER_PYTHON``:

    AUDIO_REWARD_TEST_SERVER_PYTHON=.venv/bin/python \\
        .venv-tts/bin/python -m pytest -q tests/integration/trainer/test_tiny_qwen3_tts.py

GRPO advantages are computed here with verl's formula
(``core_algos.compute_grpo_outcome_advantage``: ``(r - mean) / (std + 1e-6)``
per group, unbiased std): verl needs transformers >= 5.5 and cannot be
imported beside qwen-tts.  ``test_reward_loop.py`` runs verl's own estimator
on real rewards.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("qwen_tts") is None:
    pytest.skip("qwen-tts is not installed (build the TTS environment with scripts/envs/tts.sh)",
                allow_module_level=True)

from tests.testkit import tiny_qwen3_tts as tiny  # noqa: E402

tiny.import_qwen_tts()

from audio_reward.protocol import RewardOptions  # noqa: E402
from audio_reward.scorer_client import ScoreItem, ScorerClient, ScoreResult  # noqa: E402

TEXT = "The quick brown fox."
GROUP = 8  # verl-omni's Qwen3-TTS recipe samples n=8 per prompt
MAX_NEW_TOKENS = 30  # 2.4 s of audio at most
MODEL_SEED, SAMPLING_SEED = 0, 1
# Random audio mostly transcribes to nothing, so CER alone would tie the group; the reward's
# own penalties (empty transcript, duration off the text's expected length, very short audio)
# tell the candidates apart, as they do for a young policy.
REWARD = RewardOptions(formula="exp", empty_transcript_penalty=0.05, duration_penalty=0.03,
                       short_audio_penalty=0.02)
GRPO_EPS = 1e-6  # verl's compute_grpo_outcome_advantage epsilon


@dataclass
class Rollout:
    tts: tiny.TinyQwen3TTS
    input_id: torch.Tensor
    codes: list[torch.Tensor]  # per utterance (T, G)
    ended: list[bool]  # stopped on EOS (else on the token limit)
    generation_logits: torch.Tensor  # (B, steps, V): codec_head's output at each sampling step
    wavs: list[np.ndarray]
    sample_rate: int
    results: list[ScoreResult]

    @property
    def rewards(self) -> torch.Tensor:
        return torch.tensor([r.score for r in self.results], dtype=torch.float32)


@pytest.fixture(scope="module")
def rollout(scorer_url: str) -> Iterator[Rollout]:
    tts = tiny.build_tiny_qwen3_tts(seed=MODEL_SEED)
    model = tts.model
    input_id = tts.tokenize(TEXT)
    steps: list[torch.Tensor] = []
    hook = model.talker.codec_head.register_forward_hook(lambda _m, _i, out: steps.append(out.detach().clone()))
    try:
        torch.manual_seed(SAMPLING_SEED)
        # Plain sampling at temperature 1 (no top-k/top-p/repetition penalty): the tokens come
        # from the talker's own codec-0 distribution, whose log-probs the update uses.
        codes, _ = model.generate(
            input_ids=[input_id] * GROUP, languages=["english"] * GROUP, speakers=[tiny.SPEAKER] * GROUP,
            non_streaming_mode=True, max_new_tokens=MAX_NEW_TOKENS, do_sample=True, temperature=1.0, top_k=0,
            top_p=1.0, repetition_penalty=1.0, subtalker_dosample=True, subtalker_temperature=1.0,
            subtalker_top_k=0, subtalker_top_p=1.0,
        )
    finally:
        hook.remove()
    # Prefill's last position predicts frame 0; each decode step predicts the next frame.
    generation_logits = torch.stack([steps[0][:, -1]] + [s[:, 0] for s in steps[1:]], dim=1)
    # generate() returns the frames before EOS.  At the token limit the last sampled token
    # never becomes a frame, so an utterance of MAX_NEW_TOKENS - 1 frames has no known EOS.
    ended = [c.shape[0] < MAX_NEW_TOKENS - 1 for c in codes]
    wavs, rate = model.speech_tokenizer.decode([{"audio_codes": c} for c in codes])
    with ScorerClient(scorer_url, timeout=120) as client:
        results = client.score_many(
            [ScoreItem(waveform=w, sample_rate=rate, text=TEXT, language="en", reward=REWARD) for w in wavs])
    failures = [r for r in results if not isinstance(r, ScoreResult)]
    assert not failures, failures
    yield Rollout(tts, input_id, codes, ended, generation_logits, wavs, rate, results)  # type: ignore[arg-type]


def test_group_is_distinct_speech_that_the_scorer_tells_apart(rollout: Rollout) -> None:
    lengths = [c.shape[0] for c in rollout.codes]
    assert len(lengths) == GROUP and min(lengths) >= 2
    assert any(rollout.ended), "no utterance stopped on EOS"
    assert all(c.shape[1] == tiny.NUM_CODE_GROUPS for c in rollout.codes)
    assert all(int(c.min()) >= 0 and int(c.max()) < tiny.CODEBOOK_SIZE for c in rollout.codes)
    assert rollout.sample_rate == 24000
    upsample = rollout.tts.model.speech_tokenizer.model.get_decode_upsample_rate()
    for frames, wav, result in zip(rollout.codes, rollout.wavs, rollout.results, strict=True):
        assert wav.dtype == np.float32 and wav.shape == (frames.shape[0] * upsample,)
        assert np.isfinite(wav).all() and float(wav.std()) > 1e-3
        assert result.diagnostics["duration_s"] == pytest.approx(wav.shape[0] / 24000, abs=1e-3)
        assert result.diagnostics["reward_formula"] == "exp"
        assert 0.0 <= result.score <= 1.0
    distinct = {w.tobytes() for w in rollout.wavs}
    assert len(distinct) > 1
    rewards = rollout.rewards.tolist()
    assert len(set(rewards)) > 1, f"every candidate got the same reward {rewards}: no GRPO signal"


def test_teacher_forced_codec0_logits_equal_the_sampling_logits(rollout: Rollout) -> None:
    model = rollout.tts.model
    prompt = tiny.talker_prompt(model, rollout.input_id, tiny.SPEAKER, "english")
    with torch.no_grad():
        batch = tiny.teacher_forced_codec0(model, [prompt] * GROUP, rollout.codes, rollout.ended)
    for b, (frames, ended) in enumerate(zip(rollout.codes, rollout.ended, strict=True)):
        k = frames.shape[0] + int(ended)
        assert int(batch.mask[b].sum()) == k
        assert batch.targets[b, k - 1] == (tiny.CODEC_EOS if ended else frames[-1, 0])
        torch.testing.assert_close(batch.logits[b, :k], rollout.generation_logits[b, :k], atol=1e-4, rtol=1e-4)
    logp = codec0_logprobs(batch)
    assert torch.isfinite(logp).all() and (logp[batch.mask == 1] < 0).all()


def codec0_logprobs(batch: tiny.Codec0Batch) -> torch.Tensor:
    # The sampler's support: qwen-tts suppresses the control-token block except EOS.
    return batch.logprobs(temperature=1.0, suppress_from=tiny.TALKER_VOCAB - 1024, eos_id=tiny.CODEC_EOS)


def grpo_advantages(rewards: torch.Tensor) -> torch.Tensor:
    """One group's outcome advantages, as verl's ``compute_grpo_outcome_advantage``."""
    return (rewards - rewards.mean()) / (rewards.std() + GRPO_EPS)


def policy_loss(model: Any, rollout: Rollout, advantages: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Token-mean ``-A * logp`` over codec-0 tokens (on-policy PPO ratio 1); also per-utterance mean logp."""
    prompt = tiny.talker_prompt(model, rollout.input_id, tiny.SPEAKER, "english")
    batch = tiny.teacher_forced_codec0(model, [prompt] * GROUP, rollout.codes, rollout.ended)
    logp = codec0_logprobs(batch)
    mask = batch.mask.to(logp.dtype)
    loss = -(advantages[:, None] * logp * mask).sum() / mask.sum()
    return loss, (logp * mask).sum(1) / mask.sum(1)


def test_one_grpo_step_moves_codec0_toward_the_rewarded_samples(rollout: Rollout) -> None:
    # A fresh copy of the policy that sampled the group (same seed, same weights), trained here.
    model = tiny.build_tiny_qwen3_tts(seed=MODEL_SEED).model
    talker = model.talker
    assert torch.equal(talker.codec_head.weight, rollout.tts.model.talker.codec_head.weight)
    talker.code_predictor.requires_grad_(False)  # the recipe trains codec-0; the code predictor stays frozen
    params = [p for p in talker.parameters() if p.requires_grad]
    before = {n: p.detach().clone() for n, p in talker.named_parameters() if p.requires_grad}

    rewards = rollout.rewards
    advantages = grpo_advantages(rewards)
    assert advantages.abs().sum() > 0 and abs(float(advantages.mean())) < 1e-5

    model.train()
    loss, mean_logp = policy_loss(model, rollout, advantages)
    loss.backward()
    grads = {n: p.grad for n, p in talker.named_parameters() if p.requires_grad}
    for name in ("codec_head.weight", "model.layers.0.self_attn.q_proj.weight", "model.layers.1.mlp.down_proj.weight",
                 "model.codec_embedding.weight", "text_projection.linear_fc1.weight"):
        grad = grads[name]
        assert grad is not None, f"no gradient reached {name}"
        assert torch.isfinite(grad).all() and grad.abs().sum() > 0, f"{name}: gradient {grad}"
    assert all(p.grad is None for p in talker.code_predictor.parameters())

    torch.optim.AdamW(params, lr=1e-3, weight_decay=0.0).step()
    changed = [n for n, p in talker.named_parameters() if p.requires_grad and not torch.equal(p, before[n])]
    assert "codec_head.weight" in changed and "model.layers.0.self_attn.q_proj.weight" in changed

    with torch.no_grad():
        new_loss, new_mean_logp = policy_loss(model, rollout, advantages)
    assert float(new_loss) < float(loss.detach())
    delta = new_mean_logp - mean_logp.detach()
    best, worst = int(torch.argmax(rewards)), int(torch.argmin(rewards))
    assert float(delta[best]) > float(delta[worst]), (rewards.tolist(), delta.tolist())
    # Across the group, likelihood moved toward positive-advantage utterances.
    assert float((advantages * delta).sum()) > 0
