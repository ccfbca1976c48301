"""Pre-flight of the training model folder: each problem is one failed check with its own message."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("safetensors", reason="needs safetensors: the trainer or the TTS environment")

from audio_reward.trainer_plugin.model_folder import FolderKind, inspect_folder
from audio_reward.trainer_plugin.preflight import check_model
from tests.testkit.model_folders import model_folder


def _config(path: object) -> dict:
    return {"actor_rollout_ref": {"model": {"path": str(path)}}}


def test_a_full_base_folder_passes(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "Qwen3-TTS-Base")
    assert inspect_folder(folder).kind is FolderKind.FULL
    (check,) = check_model(_config(folder))
    assert check.ok and "weights readable" in check.message


@pytest.mark.parametrize("case", ["hub_id", "missing", "no_speaker_encoder", "unreadable", "talker_only", "no_weights"])
def test_each_problem_fails_with_its_own_message(case: str, tmp_path: Path) -> None:
    if case == "hub_id":
        path, expected = "Qwen/Qwen3-TTS-12Hz-0.6B-Base", "looks like a Hugging Face hub id"
    elif case == "missing":
        path, expected = tmp_path / "nowhere", "does not exist"
    elif case == "no_speaker_encoder":
        path, expected = model_folder(tmp_path / "m", speaker_encoder=False), "has no speaker-encoder weights"
    elif case == "unreadable":
        path = model_folder(tmp_path / "m")
        weights = path / "model.safetensors"
        weights.write_bytes(weights.read_bytes()[:-8])
        expected = "model.safetensors is not a readable safetensors file"
    elif case == "talker_only":
        path, expected = model_folder(tmp_path / "m", talker_only=True), "is a talker-only training export"
    else:
        path = tmp_path / "m"
        path.mkdir()
        (path / "config.json").write_text("{}")
        expected = "holds no .safetensors weights"
    checks = check_model(_config(path))
    assert len(checks) == 1 and not checks[0].ok and expected in checks[0].message, checks
    if case == "hub_id":
        assert "download it first" in checks[0].message


def test_other_models_need_only_readable_weights(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "omni", model_type="qwen3_omni_moe", speaker_encoder=False)
    (folder / "config.json").write_text('{"model_type": "qwen3_omni_moe"}')
    for extra in folder.glob("*.safetensors"):
        extra.rename(folder / "model-00001-of-00001.safetensors")
    (check,) = check_model(_config(folder))
    assert check.ok, check


def test_a_sharded_folder_missing_a_shard_fails(tmp_path: Path) -> None:
    folder = model_folder(tmp_path / "m")
    (folder / "model.safetensors.index.json").write_text(
        '{"weight_map": {"a": "model.safetensors", "b": "model-00002-of-00002.safetensors"}}')
    (check,) = check_model(_config(folder))
    assert not check.ok and "model-00002-of-00002.safetensors is named by model.safetensors.index.json" in check.message
