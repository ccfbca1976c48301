"""Both recipes' launch: the dry run of run.sh, the composed config against verl-omni's real config tree,
the preflight's refusals, and the data preparation.

The composition contract runs when ``VERL_OMNI_SRC`` names a verl-omni
checkout (CI has none: verl-omni is not on PyPI and pins its own verl), with
verl's config tree from the installed verl, as ``omni_trainer.yaml``'s
``hydra.searchpath`` asks. The TTS pre-flight tests need a checkout that
registers the Qwen3-TTS pipeline (main 1eb5a488 or later, docs/training.md section 1):
on verl-omni main before that merge (a1139baf) the pre-flight refuses the TTS recipe, as it should
(tests/unit/trainer/test_omni_source.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import soundfile as sf

from audio_reward.trainer_plugin.recipes import RECIPES_DIR
from audio_reward.trainer_plugin.recipes.launch import ENTRY_POINT, LaunchError, plan
from audio_reward.trainer_plugin.recipes.omni_thinker_grpo import (
    prepare_data as thinker_data,
)
from audio_reward.trainer_plugin.recipes.qwen3_tts_grpo import prepare_data as tts_data
from tests.testkit.model_folders import model_folder

VERL_OMNI_SRC = os.environ.get("VERL_OMNI_SRC")
needs_verl_omni = pytest.mark.skipif(
    not VERL_OMNI_SRC or not (Path(VERL_OMNI_SRC) / "verl_omni/trainer/config/omni_trainer.yaml").is_file(),
    reason="VERL_OMNI_SRC does not name a verl-omni checkout (verl-omni is not on PyPI; CI has none)",
)


@pytest.fixture
def paths(tmp_path: Path) -> dict[str, str]:
    """Required recipe paths: in a dry run any existing files will do; the preflight reads the model folder."""
    model_folder(tmp_path / "model")
    for name in ("train.parquet", "val.parquet"):
        (tmp_path / name).touch()
    (tmp_path / "voice.json").write_text(json.dumps([0.25] * 4))  # the talker's hidden size in model_folder()
    return {"MODEL_PATH": str(tmp_path / "model"), "TRAIN_FILE": str(tmp_path / "train.parquet"),
            "VAL_FILE": str(tmp_path / "val.parquet"), "SPK_EMBED_PATH": str(tmp_path / "voice.json"),
            "AUDIO_REWARD_URL": "http://127.0.0.1:9", "OUTPUT_DIR": str(tmp_path / "run")}


def dry_run(recipe: str, env: dict[str, str], *overrides: str) -> subprocess.CompletedProcess:
    base = {k: v for k, v in os.environ.items() if k not in ("VERL_USE_EXTERNAL_MODULES",)}
    return subprocess.run(
        ["bash", str(RECIPES_DIR / recipe / "run.sh"), *overrides],
        capture_output=True,
        text=True,
        check=False,
        env={**base, **env, "AUDIO_REWARD_DRY_RUN": "1", "PYTHON_BIN": sys.executable},
        timeout=120,
    )


def split_listing(stdout: str) -> tuple[dict[str, str], list[str]]:
    lines = stdout.splitlines()
    sep = lines.index("--")
    return dict(line.split("=", 1) for line in lines[:sep]), lines[sep + 1 :]


def overrides_of(command: list[str]) -> dict[str, str]:
    return {k.lstrip("+"): v for k, _, v in (w.partition("=") for w in command[2:])}


def test_tts_dry_run_prints_env_then_verl_omni_command(paths: dict[str, str]) -> None:
    # The scorer URL is dead: a dry run contacts nothing and runs no preflight.
    result = dry_run("qwen3_tts_grpo", paths, "actor_rollout_ref.rollout.n=4", "trainer.total_training_steps=3")
    assert result.returncode == 0, result.stderr
    env, command = split_listing(result.stdout)
    assert env["VERL_USE_EXTERNAL_MODULES"].split(",") == ["verl_omni", "audio_reward.trainer_plugin.verl_plugin"]
    assert env["OUTPUT_DIR"] == paths["OUTPUT_DIR"] and env["PYTHONHASHSEED"] == "42"
    assert command[:2] == list(ENTRY_POINT) == ["-m", "verl_omni.trainer.main_omni"]
    assert not any(w.startswith(("--config-path", "--config-name")) for w in command)
    assert command[-2:] == ["actor_rollout_ref.rollout.n=4", "trainer.total_training_steps=3"]  # the user's last
    o = overrides_of(command)
    assert (o["actor_rollout_ref.rollout.load_format"], o["actor_rollout_ref.rollout.tensor_model_parallel_size"]) == (
        "safetensors",
        "1",
    )
    assert o["actor_rollout_ref.rollout.engine_kwargs.vllm_omni.pipeline_name"] == "qwen3_tts_rl"
    assert o["actor_rollout_ref.model.override_config.tts_spk_embed_path"] == paths["SPK_EMBED_PATH"]
    assert o["reward.audio_reward.server_url"] == paths["AUDIO_REWARD_URL"]
    assert o["trainer.v1.sampler.custom_sampler.name"] == "FailClosedReplayBuffer"
    # the same listing as launch.py's plan: one source for run.sh, the preflight and the tests
    assert command[2:-2] == plan("qwen3_tts_grpo", environ=paths).overrides


def test_thinker_dry_run(paths: dict[str, str]) -> None:
    result = dry_run("omni_thinker_grpo", {k: paths[k] for k in ("MODEL_PATH", "TRAIN_FILE", "VAL_FILE")})
    assert result.returncode == 0, result.stderr
    env, command = split_listing(result.stdout)
    assert (
        "verl_omni" in env["VERL_USE_EXTERNAL_MODULES"].split(",") and env["OUTPUT_DIR"] == "outputs/omni_thinker_grpo"
    )
    o = overrides_of(command)
    assert command[:2] == ["-m", "verl_omni.trainer.main_omni"]
    assert o["actor_rollout_ref.rollout.engine_kwargs.vllm_omni.pipeline_name"] == "qwen3_omni_moe"
    assert o["reward.custom_reward_function.path"] == "pkg://audio_reward.trainer_plugin.mcq"
    # verl-omni's AVQA example: room over the filter's limit, since verl raises for a longer multimodal prompt
    assert int(o["actor_rollout_ref.rollout.prompt_length"]) == int(o["data.max_prompt_length"]) + 64 == 4160
    assert o["data.filter_overlong_prompts_workers"] == "64"


def test_dry_run_refuses_missing_settings(paths: dict[str, str]) -> None:
    env = dict(paths, SPK_EMBED_PATH=paths["SPK_EMBED_PATH"] + ".missing", SPK_REF_WAV="/nonexistent/ref.wav")
    del env["AUDIO_REWARD_URL"]
    result = dry_run("qwen3_tts_grpo", env)
    assert result.returncode == 2 and result.stdout == ""
    assert "set AUDIO_REWARD_URL" in result.stderr and "voice.json.missing does not exist" in result.stderr
    assert "SPK_REF_WAV=/nonexistent/ref.wav does not exist" in result.stderr
    with pytest.raises(LaunchError, match="unknown recipe"):
        plan("no_such_recipe", environ=paths)


def compose_omni(command: list[str]) -> Any:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(VERL_OMNI_SRC) / "verl_omni/trainer/config"), version_base=None):
        return compose(config_name="omni_trainer", overrides=command[2:])


@needs_verl_omni
def test_tts_dry_run_composes_against_verl_omni(paths: dict[str, str]) -> None:
    pytest.importorskip("verl")
    from audio_reward.trainer_plugin.settings import FailurePolicy, PluginSettings

    _, command = split_listing(dry_run("qwen3_tts_grpo", paths).stdout)
    cfg = compose_omni(command)
    model, rollout = cfg.actor_rollout_ref.model, cfg.actor_rollout_ref.rollout
    assert (model.model_stage, model.hf_config_name, model.model_type) == ("talker", "talker_config", "omni_model")
    assert model.override_config.tts_language == "Auto" and model.override_config.attn_implementation == "eager"
    assert (rollout.name, rollout.load_format, rollout.tensor_model_parallel_size) == ("vllm_omni", "safetensors", 1)
    assert rollout.enforce_eager and not rollout.free_cache_engine and rollout.n == 8
    assert rollout.engine_kwargs.vllm_omni.attention_config.backend == "TRITON_ATTN"
    assert cfg.actor_rollout_ref.actor.fsdp_config.model_dtype == "float32"
    assert cfg.actor_rollout_ref.actor.fsdp_config.mixed_precision.param_dtype == "bf16"
    assert cfg.data.train_batch_size == 4 and cfg.actor_rollout_ref.actor.optim.lr == pytest.approx(1e-6)
    assert cfg.trainer.v1.trainer_mode == "omni_sync"  # verl-omni's v1 trainer
    assert cfg.reward.reward_manager.module.path == "pkg://audio_reward.trainer_plugin.reward_manager"
    settings = PluginSettings.from_config(cfg)
    assert settings.failure_policy is FailurePolicy.RAISE and settings.server_url == (paths["AUDIO_REWARD_URL"],)
    assert settings.validation_dir == f"{paths['OUTPUT_DIR']}/validation_audio"


@needs_verl_omni
def test_thinker_dry_run_composes_against_verl_omni(paths: dict[str, str]) -> None:
    pytest.importorskip("verl")
    env = {k: paths[k] for k in ("MODEL_PATH", "TRAIN_FILE", "VAL_FILE")}
    _, command = split_listing(dry_run("omni_thinker_grpo", env).stdout)
    cfg = compose_omni(command)
    model = cfg.actor_rollout_ref.model
    assert model.model_stage == "thinker" and model.lora_rank == 32
    assert list(model.target_modules) == ["q_proj", "k_proj", "v_proj", "o_proj"]
    for frozen in ("talker", "code2wav", "code_predictor", "visual", "audio_tower"):
        assert f".*{frozen}.*" in model.exclude_modules
    assert cfg.actor_rollout_ref.rollout.engine_kwargs.vllm_omni.pipeline_name == "qwen3_omni_moe"
    assert cfg.data.custom_cls.name == "QwenOmniRLHFDataset" and cfg.data.mm_processor_kwargs.sampling_rate == 16000
    assert cfg.algorithm.adv_estimator == "grpo" and cfg.reward.custom_reward_function.name == "compute_score"


@needs_verl_omni
def test_thinker_full_backbone_composes_against_verl_omni(paths: dict[str, str]) -> None:
    pytest.importorskip("verl")
    from audio_reward.trainer_plugin.preflight import check_rollout_correction

    env = {k: paths[k] for k in ("MODEL_PATH", "TRAIN_FILE", "VAL_FILE")}
    _, lora = split_listing(dry_run("omni_thinker_grpo", env).stdout)
    _, full = split_listing(dry_run("omni_thinker_grpo", {**env, "BACKBONE": "full"}).stdout)
    for cfg in (compose_omni(lora), compose_omni(full)):  # the mismatch metric is logged in both, without TIS
        assert cfg.actor_rollout_ref.rollout.calculate_log_probs is True and check_rollout_correction(cfg) == []
        assert cfg.trainer.total_epochs == 1 and cfg.trainer.max_actor_ckpt_to_keep == 2
        assert cfg.data.max_response_length == 12288
    cfg = compose_omni(full)
    assert cfg.actor_rollout_ref.model.lora_rank == 0 and cfg.actor_rollout_ref.actor.optim.lr == 1e-6
    fsdp = cfg.actor_rollout_ref.actor.fsdp_config
    assert fsdp.param_offload and fsdp.optimizer_offload


@needs_verl_omni
def test_thinker_tis_switch_composes_and_preflight_reads_it(paths: dict[str, str]) -> None:
    pytest.importorskip("verl")
    from audio_reward.trainer_plugin.preflight import check_rollout_correction

    env = {k: paths[k] for k in ("MODEL_PATH", "TRAIN_FILE", "VAL_FILE")}
    _, plain = split_listing(dry_run("omni_thinker_grpo", env).stdout)
    assert check_rollout_correction(compose_omni(plain)) == []  # off unless asked
    _, command = split_listing(dry_run("omni_thinker_grpo", {**env, "TIS_THRESHOLD": "2.0"}).stdout)
    cfg = compose_omni(command)
    correction = cfg.algorithm.rollout_correction
    assert (correction.rollout_is, correction.rollout_is_threshold, correction.bypass_mode) == ("token", 2.0, False)
    assert cfg.actor_rollout_ref.rollout.calculate_log_probs is True
    (check,) = check_rollout_correction(cfg)
    assert check.ok and check.message == "rollout_is=token, threshold 2.0, rollout_rs=None"
    off = compose_omni([*command, "actor_rollout_ref.rollout.calculate_log_probs=false"])
    (refused,) = check_rollout_correction(off)
    assert not refused.ok and "verl skips the correction" in refused.message


@needs_verl_omni
def test_preflight_refuses_what_would_train_on_noise(
    paths: dict[str, str], monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    pytest.importorskip("verl")
    from audio_reward.cli import main as cli_main

    for key, value in paths.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("VERL_USE_EXTERNAL_MODULES", "verl_omni")
    code = cli_main(
        [
            "preflight",
            "qwen3_tts_grpo",
            "actor_rollout_ref.rollout.load_format=dummy",
            "actor_rollout_ref.rollout.tensor_model_parallel_size=2",
            "actor_rollout_ref.rollout.n=1",
            "trainer.v1.sampler.custom_sampler.path=null",
            "--skip-server",
            "--skip-data",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1
    assert "load_format=dummy: verl-omni syncs trained weights to stage 0 only" in out
    assert "tensor_model_parallel_size=2: pipeline qwen3_tts_rl runs its talker and code2wav stages unsharded" in out
    assert "rollout.n must be >= 2, got 1" in out
    assert "trains on without it" in out
    monkeypatch.delenv("VERL_USE_EXTERNAL_MODULES")
    assert cli_main(["preflight", "qwen3_tts_grpo", "--skip-server", "--skip-data"]) == 1
    assert "export VERL_USE_EXTERNAL_MODULES=verl_omni" in capsys.readouterr().out
    monkeypatch.setenv("VERL_USE_EXTERNAL_MODULES", "verl_omni")
    Path(paths["SPK_EMBED_PATH"]).write_text("{}")
    assert cli_main(["preflight", "qwen3_tts_grpo", "--skip-server", "--skip-data"]) == 1
    assert "load_speaker_xvector format" in capsys.readouterr().out


@needs_verl_omni
def test_tts_data_prep_and_preflight_pass(
    tmp_path: Path,
    paths: dict[str, str],
    scorer_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture,
) -> None:
    pytest.importorskip("verl")
    import pyarrow as pa
    import pyarrow.parquet as pq

    from audio_reward.cli import main as cli_main

    src = tmp_path / "texts.txt"
    src.write_text("\n".join(f"Sentence number {i} is spoken aloud." for i in range(6)) + "\n\n")
    assert tts_data.main([str(src), "--out-dir", str(tmp_path / "d"), "--val-size", "2"]) == 0
    val = pq.read_table(tmp_path / "d" / "val.parquet").to_pylist()
    assert len(val) == 2 and val[0]["extra_info"]["split"] == "val"
    assert val[0]["reward_model"]["ground_truth"] == val[0]["prompt"][0]["content"]
    env = dict(
        paths,
        TRAIN_FILE=str(tmp_path / "d" / "train.parquet"),
        VAL_FILE=str(tmp_path / "d" / "val.parquet"),
        AUDIO_REWARD_URL=scorer_url,
        VERL_USE_EXTERNAL_MODULES="verl_omni",
        AUDIO_REWARD_PREFLIGHT_PROBE_S="5",  # a short throughput probe where the session's scorer measured nothing
    )
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    assert cli_main(["preflight", "qwen3_tts_grpo"]) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "protocol 1" in out and "qwen3_tts_rl: load_format=safetensors, TP 1" in out
    # the recipe's step against the CPU scorer of the tests: a warning with the estimate, not a failure
    assert "[WARN] scorer speed: " in out and "a step's 4 prompts × 8 = 32 clips of up to 28.8 s" in out
    assert "FailClosedReplayBuffer: the run stops after 1 failed group(s)" in out
    assert "registers rollout vllm_omni, pipeline qwen3_tts_rl, agent loop omni_single_turn_agent" in out
    # A validation file whose rows do not say they are validation rows would score and write nothing.
    rows = [{**r, "extra_info": {k: v for k, v in r["extra_info"].items() if k != "split"}} for r in val]
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "d" / "val.parquet")
    assert cli_main(["preflight", "qwen3_tts_grpo", "--skip-server"]) == 1
    out = capsys.readouterr().out
    assert "2 of 2 validation rows (first: row 0) have no extra_info.split in ['val', 'validation', 'test']" in out


def test_tts_data_prep_writes_the_runs_voice_only_when_asked(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq
    import soundfile as sf

    src = tmp_path / "texts.txt"
    src.write_text("\n".join(f"Sentence number {i} is spoken aloud." for i in range(4)) + "\n")
    voice = tmp_path / "voice.wav"
    sf.write(voice, np.zeros(16_000, dtype=np.float32), 16_000)
    assert tts_data.main([str(src), "--out-dir", str(tmp_path / "plain"), "--val-size", "1"]) == 0
    assert tts_data.main([str(src), "--out-dir", str(tmp_path / "voiced"), "--val-size", "1",
                          "--speaker-reference", str(voice)]) == 0
    plain = pq.read_table(tmp_path / "plain" / "train.parquet").to_pylist()
    voiced = pq.read_table(tmp_path / "voiced" / "train.parquet").to_pylist()
    assert all("speaker_reference_path" not in row["extra_info"] for row in plain)  # off by default
    assert {row["extra_info"]["speaker_reference_path"] for row in voiced} == {str(voice.resolve())}
    with pytest.raises(SystemExit):
        tts_data.main([str(src), "--out-dir", str(tmp_path / "x"), "--speaker-reference", str(tmp_path / "no.wav")])


def test_thinker_data_prep_feeds_the_mcq_reward(tmp_path: Path) -> None:
    pytest.importorskip("pyarrow")
    clip = tmp_path / "clips" / "a.wav"
    clip.parent.mkdir()
    sf.write(clip, np.zeros(1600, np.float32), 16000)
    rows = [
        {
            "audio": "clips/a.wav",
            "question": "What makes the sound?",
            "options": ["A. a dog", "B. a car horn"],
            "answer": "<answer>B</answer>",
            "id": f"q{i}",
        }
        for i in range(3)
    ]
    src = tmp_path / "avqa.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows))
    assert thinker_data.main([str(src), "--out-dir", str(tmp_path / "d"), "--val-size", "1"]) == 0
    import pyarrow.parquet as pq

    row = pq.read_table(tmp_path / "d" / "train.parquet").to_pylist()[0]
    # verl-omni's QwenOmniRLHFDataset reads the clip paths of the `audios` column for the <audio> placeholders
    assert row["prompt"][1]["content"].startswith("<audio>What makes the sound?")
    assert row["audios"] == [str(clip.resolve())] and row["reward_model"]["ground_truth"] == "B"
    from audio_reward.trainer_plugin.mcq import compute_score

    result = compute_score(
        row["data_source"], "It is a car horn. Answer: B", row["reward_model"]["ground_truth"], row["extra_info"]
    )
    assert result["acc"] == 1.0


def _r1_record(i: int, **overrides: Any) -> dict[str, Any]:
    """One AVQA-R1-6K record (verl-omni's converter's input layout), its answer cycling through A, B, C."""
    record = {"problem_id": 100 + i, "problem": f"Which sound comes first in clip {i}?", "data_type": "image_audio",
              "problem_type": "multiple choice", "options": ["A. rain", "B. applause", "C. traffic"],
              "solution": f"<answer>{'ABC'[i % 3]}</answer>",
              "path": {"image": f"images/{i}.jpg", "audio": f"audios/{i}.wav"}, "data_source": "OmniInstruct_v1-AVQA"}
    return {**record, **overrides}


def _r1_split(folder: Path, name: str, good: int, bad: list[dict[str, Any]]) -> None:
    """``folder/omni_rl_format_<name>.json`` with ``good`` usable records (tiny WAVs beside it), then ``bad``."""
    (folder / "audios").mkdir(parents=True, exist_ok=True)
    for i in range(good):
        sf.write(folder / "audios" / f"{i}.wav", np.zeros(1600 + 160 * i, np.float32), 16000)
    records = [_r1_record(i) for i in range(good)] + bad
    (folder / f"omni_rl_format_{name}.json").write_text(json.dumps(records), encoding="utf-8")


def _bad_r1_records(root: Path) -> list[dict[str, Any]]:
    """One record per drop reason; the clips leading out of the data root exist: only the containment drops them."""
    (root / "train" / "audios").mkdir(parents=True)
    outside = root / "outside.wav"
    sf.write(outside, np.zeros(1600, np.float32), 16000)
    (root / "train" / "audios" / "link.wav").symlink_to(outside)
    return [
        _r1_record(50, path={"audio": "../outside.wav"}),  # ../ out of the data root
        _r1_record(51, path={"audio": "audios/link.wav"}),  # a link inside the root to a file outside it
        _r1_record(52, path={"audio": "audios/never_written.wav"}),
        _r1_record(53, data_type="image", path={"image": "images/53.jpg"}),  # image only: nothing for the thinker
        _r1_record(54, solution="<answer>Z</answer>"),
        _r1_record(55, options=["A. rain", "A. applause"]),
        _r1_record(56, problem="  "),
    ]


def test_thinker_data_prep_reads_the_avqa_r1_folder_and_reports_what_it_dropped(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    root = tmp_path / "AVQA_R1"
    _r1_split(root / "train", "train", 4, _bad_r1_records(root))
    _r1_split(root / "valid", "valid", 2, [_r1_record(9, path={"audio": str(root / "outside.wav")})])  # absolute

    assert thinker_data.main([str(root), "--out-dir", str(tmp_path / "d")]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("wrote 4 train rows to ") and " and 2 validation rows to " in out[0]
    assert out[1] == ("kept 6 of 14 AVQA-R1 records; dropped 8: audio_outside_root 3, empty_problem 1, "
                      "invalid_options 1, invalid_solution 1, missing_audio 1, unsupported_modality 1")
    train = pq.read_table(tmp_path / "d" / "train.parquet").to_pylist()
    val = pq.read_table(tmp_path / "d" / "val.parquet").to_pylist()
    assert "images" not in train[0]  # the thinker gets the audio only
    assert [r["extra_info"]["split"] for r in train + val] == ["train"] * 4 + ["val"] * 2
    assert [r["extra_info"]["index"] for r in train + val] == ["train/0", "train/1", "train/2", "train/3",
                                                               "valid/0", "valid/1"]
    assert [r["reward_model"]["ground_truth"] for r in train] == ["A", "B", "C", "A"]
    first = train[1]
    assert first["prompt"][1]["content"] == ("<audio>Which sound comes first in clip 1?\n"
                                             "Options:\nA. rain\nB. applause\nC. traffic")
    assert first["audios"] == [str((root / "train" / "audios" / "1.wav").resolve())]
    assert first["extra_info"]["problem_id"] == "101" and first["extra_info"]["problem_type"] == "multiple choice"
    from audio_reward.trainer_plugin.mcq import compute_score

    graded = compute_score(first["data_source"], "<think>claps</think><answer>B</answer>",
                           first["reward_model"]["ground_truth"], first["extra_info"])
    assert graded["acc"] == 1.0

    # the folder brings its own split: --val-size is refused, in one line, before anything is written
    assert thinker_data.main([str(root), "--out-dir", str(tmp_path / "e"), "--val-size", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "brings its own validation split" in err and not (tmp_path / "e").exists()


def test_thinker_data_prep_splits_one_avqa_r1_file_and_refuses_one_without_a_usable_record(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    _r1_split(tmp_path / "train", "train", 4, [_r1_record(7, data_type="image")])
    source = tmp_path / "train" / "omni_rl_format_train.json"
    assert thinker_data.main([str(source), "--out-dir", str(tmp_path / "d"), "--val-size", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[1] == "kept 4 of 5 AVQA-R1 records; dropped 1: unsupported_modality 1"
    rows = [r for f in ("train.parquet", "val.parquet") for r in pq.read_table(tmp_path / "d" / f).to_pylist()]
    assert [r["extra_info"]["split"] for r in rows] == ["train"] * 3 + ["val"]
    assert sorted(r["extra_info"]["index"] for r in rows) == ["0", "1", "2", "3"]  # positions in the source list

    lone = tmp_path / "bad.jsonl"  # the JSONL form of the layout, every record unusable
    lone.write_text("\n".join(json.dumps(_r1_record(i, solution="")) for i in range(3)))
    assert thinker_data.main([str(lone), "--out-dir", str(tmp_path / "e")]) == 2
    err = capsys.readouterr().err
    assert err == f"prepare_data: {lone} holds no usable AVQA-R1 record (3 dropped: invalid_solution 3)\n"
    assert not (tmp_path / "e").exists()


def tts_config(**rollout: Any) -> dict[str, Any]:
    """The keys the rollout checks read, as a plain mapping (what a composed config holds)."""
    base = {
        "name": "vllm_omni",
        "load_format": "safetensors",
        "tensor_model_parallel_size": 1,
        "n": 8,
        "engine_kwargs": {"vllm_omni": {"pipeline_name": "qwen3_tts_rl", "pipeline_mode": "full"}},
    }
    return {
        "actor_rollout_ref": {"rollout": {**base, **rollout}, "model": {"override_config": {"tts_language": "Auto"}}}
    }


def test_rollout_checks_without_verl_omni(paths: dict[str, str]) -> None:
    from audio_reward.trainer_plugin.preflight import check_rollout

    env = {"VERL_USE_EXTERNAL_MODULES": "verl_omni,audio_reward.trainer_plugin.verl_plugin"}
    good = tts_config()
    good["actor_rollout_ref"]["model"]["override_config"]["tts_spk_embed_path"] = paths["SPK_EMBED_PATH"]
    assert [c.ok for c in check_rollout(good, env)] == [True]
    good["actor_rollout_ref"]["model"]["path"] = paths["MODEL_PATH"]
    assert [c.ok for c in check_rollout(good, env)] == [True]
    wide = Path(paths["SPK_EMBED_PATH"]).with_name("wide.json")
    wide.write_text(json.dumps([0.25] * 16))
    good["actor_rollout_ref"]["model"]["override_config"]["tts_spk_embed_path"] = str(wide)
    (failed,) = check_rollout(good, env)
    assert not failed.ok and "has 16 values" in failed.message
    assert "takes 4 (talker_config.hidden_size)" in failed.message
    bad = tts_config(load_format="dummy", tensor_model_parallel_size=2)
    bad["actor_rollout_ref"]["model"]["override_config"]["tts_language"] = "English"
    messages = " | ".join(c.message for c in check_rollout(bad, {}))
    for expected in (
        "VERL_USE_EXTERNAL_MODULES=verl_omni",
        "load_format=dummy",
        "tensor_model_parallel_size=2",
        "needs +actor_rollout_ref.model.override_config.tts_spk_embed_path",
        "tts_language=English",
    ):
        assert expected in messages
    thinker = {
        "actor_rollout_ref": {
            "rollout": {"name": "vllm_omni", "engine_kwargs": {"vllm_omni": {"pipeline_name": "qwen3_omni_moe"}}},
            "model": {"lora_rank": 32, "exclude_modules": ".*visual.*", "target_modules": "all-linear"},
        }
    }
    messages = " | ".join(c.message for c in check_rollout(thinker, env))
    assert "talker, code2wav, code_predictor, audio_tower" in messages and "all-linear also matches" in messages


def test_run_check_fails_when_validation_wrote_no_audio(paths: dict[str, str]) -> None:
    from audio_reward.trainer_plugin.recipes.launch import check_run
    from audio_reward.trainer_plugin.validation_log import ValidationLogger

    launch = plan("qwen3_tts_grpo", environ=paths)
    assert "no validation pass wrote artifacts" in check_run(launch)[0]
    logger = ValidationLogger(Path(paths["OUTPUT_DIR"]) / "validation_audio", max_wavs=0)
    logger.log_sample(
        "k0",
        waveform=np.zeros(160, np.float32),
        sample_rate=16000,
        text="hi",
        score=0.5,
        diagnostics={"cer": 0.5},
        step=0,
    )
    assert check_run(launch) == [f"validation pass {logger.root / 'step_000000'} wrote no audio (1 samples scored)"]
    ValidationLogger(logger.root).log_sample(
        "k1",
        waveform=np.zeros(160, np.float32),
        sample_rate=16000,
        text="hi",
        score=0.5,
        diagnostics={"cer": 0.5},
        step=20,
    )
    logger.log_sample(
        "k1", waveform=np.zeros(160, np.float32), sample_rate=16000, text="hi", score=0.5, diagnostics={}, step=0
    )
    assert len(check_run(launch)) == 1  # step 0 still has none; step 20 has its WAV
    # a run with validation turned off is not checked
    assert (
        check_run(plan("qwen3_tts_grpo", ["trainer.val_before_train=false", "trainer.test_freq=-1"], environ=paths))
        == []
    )


@needs_verl_omni
def test_run_sh_exports_runs_preflight_then_the_trainer(tmp_path: Path, paths: dict[str, str], scorer_url: str) -> None:
    """The non-dry path with a stand-in interpreter that records the trainer call (as verl-omni's own launcher
    test does) and delegates everything else (plan, preflight, run check) to this interpreter."""
    pytest.importorskip("verl")
    src = tmp_path / "texts.txt"
    src.write_text("\n".join(f"Sentence number {i} is spoken aloud." for i in range(4)) + "\n")
    assert tts_data.main([str(src), "--out-dir", str(tmp_path / "d"), "--val-size", "1"]) == 0
    capture = tmp_path / "capture"
    capture.mkdir()
    fake = tmp_path / "python"
    log_one_sample = (
        "import numpy as np, os; from audio_reward.trainer_plugin.validation_log import ValidationLogger as V; "
        "V(os.environ['OUTPUT_DIR'] + '/validation_audio').log_sample('k', waveform=np.zeros(1600, np.float32), "
        "sample_rate=16000, text='hi', score=1.0, diagnostics={}, step=0)"
    )
    fake.write_text(f'''#!/usr/bin/env bash
if [[ "$1 $2" == "-m verl_omni.trainer.main_omni" ]]; then
    env > "{capture}/env.txt"
    printf '%s\\n' "$@" > "{capture}/args.txt"
    [[ -n "${{FAKE_CRASH:-}}" ]] && {{ echo "Traceback: CUDA out of memory"; exit 3; }}
    echo '{{"step": 1, "data": {{"critic/score/mean": 0.5, "timing_s/step": 2.0}}}}' > "$VERL_FILE_LOGGER_PATH"
    [[ -z "${{FAKE_VALIDATION:-}}" ]] && exit 0
    exec {sys.executable} -c "{log_one_sample}"
fi
exec {sys.executable} "$@"
''')
    fake.chmod(0o755)
    env = dict(
        paths,
        TRAIN_FILE=str(tmp_path / "d" / "train.parquet"),
        VAL_FILE=str(tmp_path / "d" / "val.parquet"),
        AUDIO_REWARD_URL=scorer_url,
        PYTHON_BIN=str(fake),
        AUDIO_REWARD_PREFLIGHT_PROBE_S="5",
    )
    base = {k: v for k, v in os.environ.items() if k not in ("VERL_USE_EXTERNAL_MODULES", "AUDIO_REWARD_DRY_RUN")}

    def run(**extra: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            ["bash", str(RECIPES_DIR / "qwen3_tts_grpo" / "run.sh"), "trainer.total_training_steps=2"],
            capture_output=True,
            text=True,
            check=False,
            env={**base, **env, **extra},
            timeout=300,
        )

    # The trainer "ran" but no validation audio appeared: the run ends with an error saying so.
    result = run()
    assert result.returncode == 1 and "no validation pass wrote artifacts" in result.stderr
    assert "preflight: " in result.stdout and "0 failed" in result.stdout
    args = (capture / "args.txt").read_text().splitlines()
    assert args[:2] == ["-m", "verl_omni.trainer.main_omni"] and args[-1] == "trainer.total_training_steps=2"
    trainer_env = dict(line.split("=", 1) for line in (capture / "env.txt").read_text().splitlines() if "=" in line)
    assert trainer_env["VERL_USE_EXTERNAL_MODULES"] == "verl_omni,audio_reward.trainer_plugin.verl_plugin"
    assert (Path(paths["OUTPUT_DIR"]) / "train.log").is_file()
    assert trainer_env["VERL_FILE_LOGGER_PATH"] == str(Path(paths["OUTPUT_DIR"]) / "metrics.jsonl")
    assert "file" in next(a for a in args if a.startswith("trainer.logger="))
    curve = json.loads((Path(paths["OUTPUT_DIR"]) / "reward_curve.json").read_text())
    assert [(r["step"], r["reward_mean"]) for r in curve] == [(1, 0.5)]
    # With a validation step that wrote audio the run passes.
    assert run(FAKE_VALIDATION="1").returncode == 0
    # A trainer that crashes still gets the post-run check, and its own exit status is the script's.
    shutil.rmtree(Path(paths["OUTPUT_DIR"]))
    crashed = run(FAKE_CRASH="1")
    assert crashed.returncode == 3, crashed.stderr
    assert "no validation pass wrote artifacts" in crashed.stderr
    assert "the trainer exited with 3" in crashed.stderr
    assert "CUDA out of memory" in (Path(paths["OUTPUT_DIR"]) / "train.log").read_text()


def _prepare(tool: Any, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", tool.__name__, *args], capture_output=True, text=True,
                          env={**os.environ, **(env or {})}, timeout=120)


def _inputs(root: Path, n: int) -> dict[Any, Path]:
    """``n`` sentences for the TTS tool and ``n`` questions (with their clip) for the thinker's."""
    root.mkdir(parents=True, exist_ok=True)
    sentences = root / "sentences.txt"
    sentences.write_text("\n".join(f"Sentence number {i} is spoken aloud." for i in range(n)) + "\n")
    sf.write(root / "a.wav", np.zeros(1600, np.float32), 16000)
    questions = root / "avqa.jsonl"
    questions.write_text("\n".join(json.dumps({"audio": "a.wav", "question": f"Question {i}?", "id": f"q{i}",
                                               "options": ["A. yes", "B. no"], "answer": "A"}) for i in range(n)))
    return {tts_data: sentences, thinker_data: questions}


@pytest.mark.parametrize("tool", [tts_data, thinker_data], ids=["qwen3_tts", "omni_thinker"])
def test_prepare_data_names_the_extra_it_needs(tmp_path: Path, tool: Any) -> None:
    blocker = tmp_path / "blocked" / "pyarrow"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ModuleNotFoundError(\"No module named 'pyarrow'\", name='pyarrow')\n")
    src = _inputs(tmp_path / "in", 4)[tool]
    path = os.pathsep.join([str(blocker.parent), os.environ.get("PYTHONPATH", "")])
    proc = _prepare(tool, str(src), "--out-dir", str(tmp_path / "d"), env={"PYTHONPATH": path})
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert "needs the 'recipes' extra (no module named 'pyarrow')" in proc.stderr
    assert "pip install -e '.[recipes]'" in proc.stderr and not (tmp_path / "d").exists()


@pytest.mark.parametrize("tool", [tts_data, thinker_data], ids=["qwen3_tts", "omni_thinker"])
def test_prepare_data_keeps_training_the_larger_split(tmp_path: Path, tool: Any) -> None:
    pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    src, out = _inputs(tmp_path / "in", 4)[tool], tmp_path / "d"
    # 4 records and --val-size 100: one line, nothing written (it used to write 1 training row and 3 validation).
    proc = _prepare(tool, str(src), "--out-dir", str(out), "--val-size", "100")
    assert proc.returncode == 2 and proc.stdout == "" and proc.stderr.count("\n") == 1, proc.stderr
    assert ("prepare_data: --val-size 100 would leave fewer training rows than validation rows: the input holds "
            "4 records; give --val-size 2 or less") in proc.stderr
    assert not out.exists()
    proc = _prepare(tool, str(src), "--out-dir", str(out), "--val-size", "-1")
    assert proc.returncode == 2 and "--val-size must be 0 or more" in proc.stderr and not out.exists()
    proc = _prepare(tool, str(src), "--out-dir", str(out), "--val-size", "2")
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("wrote 2 train rows to ") and " and 2 validation rows to " in proc.stdout
    assert [len(pq.read_table(out / f).to_pylist()) for f in ("train.parquet", "val.parquet")] == [2, 2]


def _bare_python(tmp_path: Path) -> Path:
    """A folder whose ``python3`` is the base interpreter, outside every environment that holds audio-reward."""
    bare = tmp_path / "bare-bin"
    bare.mkdir()
    (bare / "python3").symlink_to(Path(sys.base_prefix) / "bin" / "python3")
    probe = subprocess.run([str(bare / "python3"), "-c", "import audio_reward.trainer_plugin.recipes.launch"],
                           capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip(f"the base interpreter {sys.base_prefix} can run audio-reward itself")
    return bare


def _dry_run_on_path(paths: dict[str, str], *folders: Path) -> subprocess.CompletedProcess:
    """run.sh's dry run with PATH made of ``folders`` and the system's, and no PYTHON_BIN."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON_BIN", "VIRTUAL_ENV", "VERL_USE_EXTERNAL_MODULES")}
    env.update(paths, AUDIO_REWARD_DRY_RUN="1", PATH=os.pathsep.join([*map(str, folders), "/usr/bin", "/bin"]))
    return subprocess.run(["bash", str(RECIPES_DIR / "qwen3_tts_grpo" / "run.sh")], capture_output=True, text=True,
                          check=False, env=env, timeout=120)


def test_run_sh_says_in_one_line_which_python_it_tried(paths: dict[str, str], tmp_path: Path) -> None:
    bare = _bare_python(tmp_path)
    result = _dry_run_on_path(paths, bare)
    assert result.returncode == 2 and result.stdout == "" and result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"run.sh: tried {bare / 'python3'} (the first python3 on PATH: PYTHON_BIN is "
                                    "not set and no audio-reward command is on PATH), which cannot import audio_reward")
    assert "No module named" in result.stderr and "set PYTHON_BIN=/path/to/venv/bin/python" in result.stderr


def test_run_sh_runs_on_the_python_of_the_audio_reward_command(paths: dict[str, str], tmp_path: Path) -> None:
    # The environment's bin/ is on PATH after another python3, as when a venv is not activated first.
    bare = _bare_python(tmp_path)
    tools = tmp_path / "env-bin"
    tools.mkdir()
    command = tools / "audio-reward"  # what pip writes for the console script
    command.write_text(f"#!{sys.executable}\nimport sys\nfrom audio_reward.cli import main\nsys.exit(main())\n")
    command.chmod(0o755)
    result = _dry_run_on_path(paths, bare, tools)
    assert result.returncode == 0, result.stderr
    env, launch = split_listing(result.stdout)
    assert env["OUTPUT_DIR"] == paths["OUTPUT_DIR"] and launch[:2] == list(ENTRY_POINT)
