"""The checkpoint evaluation decodes as the TTS recipe's rollout samples: one source, checked on the launch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audio_reward.trainer_plugin.recipes.launch import plan
from audio_reward.trainer_plugin.recipes.qwen3_tts_grpo import eval_checkpoints


def _overrides(tmp_path: Path) -> dict[str, str]:
    for name in ("model", "train.parquet", "val.parquet", "voice.json"):
        (tmp_path / name).touch()
    env = {"MODEL_PATH": str(tmp_path / "model"), "TRAIN_FILE": str(tmp_path / "train.parquet"),
           "VAL_FILE": str(tmp_path / "val.parquet"), "SPK_EMBED_PATH": str(tmp_path / "voice.json"),
           "AUDIO_REWARD_URL": "http://127.0.0.1:9"}
    values: dict[str, str] = {}
    for override in plan("qwen3_tts_grpo", environ=env).overrides:
        key, _, value = override.lstrip("+").partition("=")
        values[key] = value
    return values


def _defaults(*extra: str) -> eval_checkpoints.Decoding:
    args = eval_checkpoints.build_parser().parse_args(
        ["base=b", "t=t", "--val", "v", "--train", "t", "--spk-embed", "s", "--out", "o", *extra])
    return eval_checkpoints.decoding_from_args(args)


def test_evaluation_defaults_are_the_launched_rollout_and_validation_sampling(tmp_path: Path) -> None:
    launched = _overrides(tmp_path)
    decoding = _defaults()
    rollout = "actor_rollout_ref.rollout."
    for prefix in (rollout, rollout + "val_kwargs."):
        assert float(launched[prefix + "temperature"]) == decoding.temperature
        assert float(launched[prefix + "top_p"]) == decoding.top_p
        assert int(launched[prefix + "top_k"]) == decoding.top_k
    assert launched[rollout + "val_kwargs.do_sample"] == "true" and not decoding.greedy
    assert int(launched["data.max_response_length"]) == decoding.max_new_tokens
    kwargs = decoding.generate_kwargs()
    assert kwargs["do_sample"] and kwargs["temperature"] == decoding.temperature
    assert kwargs["max_new_tokens"] == decoding.max_new_tokens and kwargs["repetition_penalty"] == 1.0
    assert kwargs["top_k"] == (0 if decoding.top_k < 0 else decoding.top_k)  # vLLM's -1 is Hugging Face's 0
    assert decoding.samples == 4


def test_greedy_is_one_sample_and_seeds_are_fixed_per_text_and_sample() -> None:
    greedy = _defaults("--greedy", "--samples", "8")
    assert greedy.samples == 1 and greedy.generate_kwargs()["do_sample"] is False
    assert not greedy.generate_kwargs()["subtalker_dosample"]
    sampled = _defaults("--samples", "3")
    seeds = [sampled.sample_seed("row-1", k) for k in range(3)]
    assert seeds == [_defaults("--samples", "3").sample_seed("row-1", k) for k in range(3)]
    assert len(set(seeds)) == 3 and sampled.sample_seed("row-2", 0) != seeds[0]
    assert _defaults("--seed", "1").sample_seed("row-1", 0) != seeds[0]
    row = eval_checkpoints.EvalRow("row-1", "text")
    assert eval_checkpoints.sample_ids(row, sampled) == ["row-1.s0", "row-1.s1", "row-1.s2"]
    assert eval_checkpoints.sample_ids(row, greedy) == ["row-1"]
    json.dumps(sampled.record())  # recorded in eval_results.json as is


@pytest.mark.parametrize("flag", ["--samples", "--max-new-tokens"])
def test_zero_samples_or_frames_is_refused(flag: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = eval_checkpoints.main(["base=/nonexistent/a", "t=/nonexistent/b", "--val", "v", "--train", "t",
                                  "--spk-embed", "s", "--out", "o", flag, "0"])
    assert code == 1
    assert "must be at least 1" in capsys.readouterr().err
