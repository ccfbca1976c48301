"""``audio-reward export-checkpoint`` on actor checkpoints written by verl's own ``FSDPCheckpointManager``.

The input is not a folder shaped like a checkpoint: ``tests.testkit.verl_checkpoint``
loads a tiny random Qwen3-TTS Base model as verl-omni's talker adapter does,
wraps it in FSDP on CPU (gloo, world size 1 and 2), takes one AdamW step and
saves ``global_step_1/actor`` with verl 0.9.1's ``FSDPCheckpointManager``.
The export must give back exactly the trained tensors (FSDP's own full state
dict, gathered before the save), a folder that ``qwen_tts`` loads and
synthesises with, and one that ``eval_checkpoints.py`` evaluates end to end
against a real scorer.

Environment: verl 0.9.1 requires transformers >= 5.5.3 and qwen-tts 0.1.1
pins 4.57.3, so they share no resolved environment, and qwen-tts 0.1.1's
modules do not import under verl's transformers.  verl's checkpoint module
(``verl.utils.checkpoint.fsdp_checkpoint_manager`` and what it imports) does
import with 4.57.3, so the TTS environment installs verl ``--no-deps`` with
the few packages that import needs (scripts/envs/tts.sh); the test skips
where verl is absent.

    AUDIO_REWARD_TEST_SERVER_PYTHON=.venv/bin/python \\
        .venv-tts/bin/python -m pytest -q tests/integration/trainer/test_export_checkpoint.py
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("qwen_tts") is None:
    pytest.skip("qwen-tts is not installed (build the TTS environment with scripts/envs/tts.sh)",
                allow_module_level=True)
if importlib.util.find_spec("verl") is None:
    pytest.skip("verl is not installed beside qwen-tts (scripts/envs/tts.sh installs it --no-deps)",
                allow_module_level=True)
jsonschema = pytest.importorskip("jsonschema")
pytest.importorskip("pyarrow")

from tests.testkit import tiny_qwen3_tts as tiny  # noqa: E402

tiny.import_qwen_tts()

from safetensors.torch import load_file  # noqa: E402

from audio_reward.cli import main as cli  # noqa: E402
from audio_reward.protocol.schema import SCHEMA_DIR  # noqa: E402
from audio_reward.trainer_plugin.checkpoint_export import EXPORT_JSON  # noqa: E402
from audio_reward.trainer_plugin.model_folder import FolderKind, inspect_folder  # noqa: E402
from audio_reward.trainer_plugin.recipes.qwen3_tts_grpo import eval_checkpoints, prepare_data  # noqa: E402
from tests.testkit.verl_checkpoint import REFERENCE, TRAINED_PREFIXES, write_checkpoint  # noqa: E402

SENTENCES = ["The quick brown fox jumps over the lazy dog.", "Please call Stella.", "A short one.",
             "She sells sea shells.", "Good morning everyone.", "How are you today?"]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("export")
    tts = tiny.build_tiny_qwen3_tts(seed=0, model_type="base")
    folder = tiny.save_tiny_qwen3_tts(tts, root / "base")
    speaker = tiny.run_speaker_embedding(tts)
    (root / "voice.json").write_text(json.dumps(speaker.tolist()))
    return folder


@pytest.fixture(scope="module", params=[1, 2], ids=["world1", "world2"])
def step(request: pytest.FixtureRequest, base: Path) -> Path:
    return write_checkpoint(base, base.parent / f"run{request.param}" / "checkpoints", request.param,
                            base.parent / "voice.json")


def _bytes(tensor: torch.Tensor) -> bytes:
    return tensor.contiguous().view(torch.uint8).numpy().tobytes()


def test_export_is_byte_identical_to_the_trained_weights(step: Path, base: Path, tmp_path: Path) -> None:
    out = tmp_path / "export"
    assert cli(["export-checkpoint", str(step), "--base", str(base), "--out", str(out)]) == 0
    trained = load_file(str(step.parent / REFERENCE))
    exported = load_file(str(out / "model.safetensors"))
    original = load_file(str(base / "model.safetensors"))
    assert set(exported) == set(original)
    for key, tensor in trained.items():
        assert exported[key].dtype == tensor.dtype and _bytes(exported[key]) == _bytes(tensor), key
    # the speaker encoder (stripped before training) comes from the base; only the trainable tensors moved
    assert all(torch.equal(exported[k], original[k]) for k in original if k not in trained)
    changed = {k for k in trained if not torch.equal(trained[k], original[k])}
    assert changed and all(k.startswith(TRAINED_PREFIXES) for k in changed)
    report = json.loads((out / EXPORT_JSON).read_text())
    assert report["step"] == 1 and report["replaced"] == len(trained) and report["kept"] == len(original) - len(trained)
    assert inspect_folder(out).kind is FolderKind.FULL


def test_exported_folder_loads_in_qwen_tts_and_synthesises(step: Path, base: Path, tmp_path: Path) -> None:
    import soundfile as sf
    from qwen_tts import Qwen3TTSModel

    out = tmp_path / "export"
    assert cli(["export-checkpoint", str(step), "--base", str(base), "--out", str(out)]) == 0
    loaded = Qwen3TTSModel.from_pretrained(str(out), device_map="cpu", dtype=torch.float32).model.state_dict()
    for key, tensor in load_file(str(step.parent / REFERENCE)).items():
        assert torch.equal(loaded[key], tensor), key
    # the evaluation's own synthesis: Base task, x-vector voice clone, non-streaming
    embedding = json.loads((base.parent / "voice.json").read_text())
    manifest = eval_checkpoints.synthesize(out, [eval_checkpoints.EvalRow("s0", SENTENCES[0])], embedding, "Auto",
                                           tmp_path / "audio", "cpu", eval_checkpoints.Decoding(max_new_tokens=30))
    wave, rate = sf.read(manifest.parent / "s0.s0.wav")
    assert rate == 24000 and len(wave) > 0 and np.isfinite(wave).all()


def test_without_base_the_export_is_a_talker_only_folder(step: Path, tmp_path: Path) -> None:
    out = tmp_path / "talker"
    # verl's trainer records the last step in default_local_dir (v1/trainer_base.py:1021-1025), as here
    (step.parent / "latest_checkpointed_iteration.txt").write_text("1")
    assert cli(["export-checkpoint", str(step.parent), "--out", str(out)]) == 0
    folder = inspect_folder(out)
    assert folder.kind is FolderKind.TALKER_ONLY and not folder.problems
    assert json.loads((out / "config.json").read_text())["model_type"] == "qwen3_tts"


def test_bad_checkpoints_get_one_line(step: Path, base: Path, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "global_step_1"
    shutil.copytree(step, broken)
    world = json.loads((broken / "actor" / "fsdp_config.json").read_text())["world_size"]
    (broken / "actor" / f"model_world_size_{world}_rank_0.pt").unlink()
    assert cli(["export-checkpoint", str(broken), "--out", str(tmp_path / "a")]) == 1
    assert f"lacks model_world_size_{world}_rank_0.pt" in capsys.readouterr().err
    assert cli(["export-checkpoint", str(base), "--out", str(tmp_path / "b")]) == 1
    assert "not an FSDP actor checkpoint" in capsys.readouterr().err
    assert cli(["export-checkpoint", str(step), "--base", str(step / "actor" / "huggingface"),
                "--out", str(tmp_path / "c")]) == 1
    assert "holds no .safetensors" in capsys.readouterr().err
    assert not any((tmp_path / n).exists() for n in "abc")


def test_verl_hf_model_save_cannot_write_qwen3_tts(base: Path, tmp_path: Path) -> None:
    """Why the export exists: verl's own ``save_contents=[hf_model]`` picks the vision-to-text auto class."""
    from torch.multiprocessing import ProcessRaisedException

    with pytest.raises(ProcessRaisedException, match="Unrecognized configuration class"):
        write_checkpoint(base, tmp_path / "checkpoints", 1, base.parent / "voice.json",
                         save_contents=("model", "hf_model"))


def test_eval_checkpoints_runs_on_the_export(step: Path, base: Path, tmp_path: Path, scorer_url: str) -> None:
    if step.parent.parent.name != "run2":
        pytest.skip("one evaluation is enough: world size 2 covers the reassembly of shards")
    exported, talker = tmp_path / "export", tmp_path / "talker"
    assert cli(["export-checkpoint", str(step), "--base", str(base), "--out", str(exported)]) == 0
    assert cli(["export-checkpoint", str(step), "--out", str(talker)]) == 0
    text = tmp_path / "sentences.txt"
    text.write_text("\n".join(SENTENCES) + "\n")
    assert prepare_data.main([str(text), "--out-dir", str(tmp_path / "data"), "--val-size", "2"]) == 0
    out = tmp_path / "eval"
    code = eval_checkpoints.main([
        f"base={base}", f"step1={exported}", f"step1_talker={talker}", "--val", str(tmp_path / "data/val.parquet"),
        "--train", str(tmp_path / "data/train.parquet"), "--spk-embed", str(base.parent / "voice.json"),
        "--url", scorer_url, "--out", str(out), "--device", "cpu", "--samples", "2", "--max-new-tokens", "30"])
    assert code == 0
    results = json.loads((out / "eval_results.json").read_text())
    jsonschema.validate(results, json.loads((SCHEMA_DIR / "eval_results.schema.json").read_text()))
    by_name = {c["name"]: c for c in results["checkpoints"]}
    assert set(by_name) == {"base", "step1", "step1_talker"} and all(c["count"] == 4 for c in by_name.values())
    # the whole export and the talker-only one spliced by the evaluation are the same model (same seeds too)
    for wav in sorted((out / "step1" / "audio").glob("*.wav")):
        assert wav.read_bytes() == (out / "step1_talker" / "audio" / wav.name).read_bytes()
