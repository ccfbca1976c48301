"""Hydra composition of both recipes over verl 0.9.1's ppo_trainer, their data preparation and preflight."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

pytest.importorskip("verl")
pytest.importorskip("hydra")

from _model_folders import model_folder  # noqa: E402

from audio_reward.cli import main as cli_main  # noqa: E402
from audio_reward.trainer_plugin.preflight import load_config, run_checks  # noqa: E402
from audio_reward.trainer_plugin.recipes.omni_thinker_grpo import prepare_data as thinker_data  # noqa: E402
from audio_reward.trainer_plugin.recipes.qwen3_tts_grpo import prepare_data as tts_data  # noqa: E402
from audio_reward.trainer_plugin.settings import FailurePolicy, PluginSettings  # noqa: E402

pytestmark = pytest.mark.verl



def test_tts_recipe_composes_with_keys_at_verl_paths() -> None:
    cfg = load_config("qwen3_tts_grpo", ["actor_rollout_ref.rollout.n=4", "reward.audio_reward.failure_policy=mask",
                                         "data.train_batch_size=2"])
    assert cfg.actor_rollout_ref.rollout.n == 4 and cfg.data.train_batch_size == 2
    assert cfg.algorithm.adv_estimator == "grpo_masked"
    assert (cfg.reward.reward_manager.source, cfg.reward.reward_manager.name) == ("register", "audio_score")
    assert cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(1e-6)
    assert cfg.actor_rollout_ref.rollout.name == "vllm_omni"
    # ppo_trainer defaults are still there under the recipe
    assert cfg.actor_rollout_ref.actor.ppo_epochs == 1 and cfg.trainer.device == "cuda"
    settings = PluginSettings.from_config(cfg)
    assert settings.failure_policy is FailurePolicy.MASK
    assert settings.validation_dir == f"{cfg.trainer.default_local_dir}/validation_audio"


def test_thinker_recipe_composes_with_audio_column_and_frozen_tower() -> None:
    cfg = load_config("omni_thinker_grpo", ["actor_rollout_ref.model.lora_rank=8"])
    assert cfg.data.audio_key == "audios"
    assert cfg.actor_rollout_ref.model.lora_rank == 8
    assert cfg.actor_rollout_ref.model.exclude_modules == ".*(audio_tower|visual).*"
    assert cfg.reward.custom_reward_function.path == "pkg://audio_reward.trainer_plugin.mcq"
    assert cfg.reward.custom_reward_function.reward_kwargs.format_weight == 0.0
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.actor_rollout_ref.rollout.n == 8


def test_omni_variant_layers_the_same_recipe_over_verl_omni() -> None:
    import yaml

    from audio_reward.trainer_plugin.recipes import config_dir

    omni = yaml.safe_load((config_dir("qwen3_tts_grpo") / "qwen3_tts_grpo_omni.yaml").read_text())
    assert omni["defaults"] == ["omni_trainer", "qwen3_tts_grpo_recipe", "_self_"]
    assert omni["actor_rollout_ref"]["rollout"]["engine_kwargs"]["vllm_omni"]["pipeline_name"] == "qwen3_tts_rl"


def test_tts_data_prep_and_preflight(tmp_path: Path, scorer_url: str) -> None:
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(f"Sentence number {i} is spoken aloud." for i in range(6)) + "\n\n")
    assert tts_data.main([str(src), "--out-dir", str(tmp_path / "d"), "--val-size", "2"]) == 0
    import pyarrow.parquet as pq

    val = pq.read_table(tmp_path / "d" / "val.parquet").to_pylist()
    assert len(val) == 2 and val[0]["extra_info"]["split"] == "val"
    assert val[0]["reward_model"]["ground_truth"] == val[0]["prompt"][0]["content"]
    overrides = [f"data.train_files={tmp_path / 'd' / 'train.parquet'}", f"data.val_files={tmp_path / 'd' / 'val.parquet'}",
                 f"reward.audio_reward.server_url={scorer_url}",
                 f"actor_rollout_ref.model.path={model_folder(tmp_path / 'Qwen3-TTS-Base')}"]
    checks = run_checks(load_config("qwen3_tts_grpo", overrides))
    assert all(c.ok for c in checks), checks
    assert any("protocol 1" in c.message for c in checks if c.name == "scorer")
    assert cli_main(["preflight", "qwen3_tts_grpo", *overrides]) == 0


def test_preflight_fails_clearly_on_each_mistake(tmp_path: Path, dead_url: str, capsys: pytest.CaptureFixture) -> None:
    bad = tmp_path / "bad.parquet"
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"prompt": [{"role": "user", "content": "hi"}], "data_source": "x"}]), bad)
    code = cli_main(["preflight", "qwen3_tts_grpo", "actor_rollout_ref.rollout.n=1", f"data.train_files={bad}",
                     f"data.val_files={tmp_path / 'missing.parquet'}", f"reward.audio_reward.server_url={dead_url}",
                     "reward.audio_reward.failure_policy=mask", "algorithm.adv_estimator=grpo"])
    out = capsys.readouterr().out
    assert code == 1
    assert "rollout.n must be >= 2, got 1" in out
    assert "failure_policy=mask needs algorithm.adv_estimator in ['grpo_masked']" in out
    assert f"{dead_url}: GET /v1/info failed" in out
    assert "missing column(s) reward_model" in out and "missing.parquet does not exist" in out
    assert cli_main(["preflight", "no_such_recipe"]) == 1


def test_thinker_data_prep_feeds_the_mcq_reward(tmp_path: Path) -> None:
    clip = tmp_path / "clips" / "a.wav"
    clip.parent.mkdir()
    sf.write(clip, np.zeros(1600, np.float32), 16000)
    rows = [{"audio": "clips/a.wav", "question": "What makes the sound?", "options": ["A. a dog", "B. a car horn"],
             "answer": "<answer>B</answer>", "id": f"q{i}"} for i in range(3)]
    src = tmp_path / "avqa.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows))
    assert thinker_data.main([str(src), "--out-dir", str(tmp_path / "d"), "--val-size", "1"]) == 0
    import pyarrow.parquet as pq

    row = pq.read_table(tmp_path / "d" / "train.parquet").to_pylist()[0]
    assert row["prompt"][1]["content"].startswith("<audio>What makes the sound?")
    assert row["audios"] == [str(clip.resolve())] and row["reward_model"]["ground_truth"] == "B"
    from audio_reward.trainer_plugin.mcq import compute_score

    result = compute_score(row["data_source"], "It is a car horn. Answer: B", row["reward_model"]["ground_truth"],
                           row["extra_info"])
    assert result["acc"] == 1.0
    omni = model_folder(tmp_path / "omni", model_type="qwen3_omni_moe")
    checks = run_checks(load_config("omni_thinker_grpo", [f"data.train_files={tmp_path / 'd' / 'train.parquet'}",
                                                          f"data.val_files={tmp_path / 'd' / 'val.parquet'}",
                                                          f"actor_rollout_ref.model.path={omni}"]))
    assert all(c.ok for c in checks), checks

