"""The thinker's audio ablation (``eval_thinker.py``) on tiny random Qwen3-Omni thinkers, on rows prepare_data wrote.

The thinkers are transformers' own classes at toy sizes
(``tests/testkit/tiny_thinker.py``): a full Qwen3-Omni folder as the base and
a thinker-only folder as the trained checkpoint, the two layouts a run gives.
The tests check what the evaluation does, not what a random model knows: the
audio reaches the audio encoder in one mode and nothing of it is in the
inputs of the other, every answer is graded as the recipe's reward grades
it, and a model that ignores its input scores the same in both modes.
Runs in the trainer environment (transformers with Qwen3-Omni, pyarrow, soxr).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("pyarrow")
pytest.importorskip("soxr")
pytest.importorskip("transformers.models.qwen3_omni_moe")

import numpy as np  # noqa: E402
import soundfile as sf  # noqa: E402

from audio_reward.protocol.schema import SCHEMA_DIR  # noqa: E402
from audio_reward.scoring.choice import score_choice  # noqa: E402
from audio_reward.trainer_plugin.recipes.omni_thinker_grpo import eval_thinker, prepare_data  # noqa: E402
from tests.testkit.tiny_thinker import DEAF_ANSWER, build_thinker_folder  # noqa: E402

ANSWERS = "ABCBADBB"


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Eight AVQA-style questions of different lengths with 24 kHz clips of different lengths, split by
    prepare_data (4 held out)."""
    root = tmp_path_factory.mktemp("avqa")
    rng = np.random.default_rng(0)
    with (root / "avqa.jsonl").open("w") as f:
        for i, answer in enumerate(ANSWERS):
            clip = root / "clips" / f"{i}.wav"
            clip.parent.mkdir(exist_ok=True)
            sf.write(clip, (0.1 * rng.standard_normal(24000 + 6000 * i)).astype(np.float32), 24000)
            question = f"<audio>What makes sound {i}?" + " Listen again." * i
            f.write(json.dumps({"audio": f"clips/{i}.wav", "question": question,
                                "options": ["A. a dog", "B. a car", "C. rain", "D. a bell"], "answer": answer}) + "\n")
    assert prepare_data.main([str(root / "avqa.jsonl"), "--out-dir", str(root / "data"), "--val-size", "4"]) == 0
    return root / "data"


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("thinkers")
    return {"base": build_thinker_folder(root / "base", full=True),
            "trained": build_thinker_folder(root / "trained", seed=1),
            "deaf": build_thinker_folder(root / "deaf", deaf=True)}


def test_the_audio_reaches_the_encoder_with_audio_and_nothing_of_it_without(data: Path,
                                                                            folders: dict[str, Path]) -> None:
    from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import _get_feat_extract_output_lengths

    rows = eval_thinker.questions(data / "val.parquet", None)
    prompter = eval_thinker.Prompter(folders["base"])
    model = eval_thinker.load_thinker(folders["base"], "cpu")
    encoded: list[tuple[int, int]] = []
    model.audio_tower.register_forward_hook(
        lambda _m, args, _out: encoded.append((args[0].shape[0], args[0].shape[1])))
    decoding = eval_thinker.Decoding(max_new_tokens=4)
    for row in rows:
        clip = prompter.load_clip(row.audios[0])
        assert clip.shape == (sf.info(row.audios[0]).frames * 16000 // 24000,)  # resampled to 16 kHz
        frames = len(clip) // 160  # the extractor's 10 ms hop
        with_audio = eval_thinker.ask_batch(model, prompter, [row], "with_audio", decoding, "cpu")[0]
        assert len(encoded) == 1 and encoded.pop() == (16, frames)  # mel bins × this clip's frames, nothing padded
        assert with_audio["audio_tokens"] == int(_get_feat_extract_output_lengths(torch.tensor(frames))) > 0
        assert with_audio["audio_clips"] == 1
        without = eval_thinker.ask_batch(model, prompter, [row], "without_audio", decoding, "cpu")[0]
        assert encoded == [] and without["audio_tokens"] == without["audio_clips"] == 0
        inputs = prompter.inputs(row, "without_audio")
        assert set(inputs) == {"input_ids", "attention_mask"}
        text = prompter.tokenizer.decode(inputs["input_ids"][0])
        assert "<audio>" not in text and "<|audio" not in text and "What makes sound" in text
        assert with_audio["prompt_tokens"] == without["prompt_tokens"] + with_audio["audio_tokens"] + 2  # start/end


def test_batched_questions_get_the_answers_asked_one_at_a_time(data: Path, folders: dict[str, Path]) -> None:
    """Greedy answers in batches of 8 and 3 (left padding, stacked clips) are the one-at-a-time answers, both modes.

    The prompts differ in length in both modes, and the model's end-of-turn
    row is scaled up so that its answers end at different steps: a finished
    row's padding must not reach its answer.
    """
    rows = eval_thinker.questions(data / "train.parquet", None) + eval_thinker.questions(data / "val.parquet", None)
    prompter = eval_thinker.Prompter(folders["base"])
    model = eval_thinker.load_thinker(folders["base"], "cpu")
    end = prompter.tokenizer.convert_tokens_to_ids("<|im_end|>")
    with torch.no_grad():
        model.lm_head.weight[end] *= 2
    widths: list[int] = []  # the batch size of every forward pass of the language model
    model.model.register_forward_pre_hook(lambda _m, _args, kwargs: widths.append(kwargs["inputs_embeds"].shape[0]),
                                          with_kwargs=True)
    decoding = eval_thinker.Decoding(max_new_tokens=24)
    for mode in eval_thinker.MODES:
        alone = eval_thinker.ask_all(model, prompter, rows, mode, decoding, "cpu", 1)
        assert set(widths) == {1}
        widths.clear()
        for size in (8, 3):
            assert eval_thinker.ask_all(model, prompter, rows, mode, decoding, "cpu", size) == alone
            assert max(widths) == size
            widths.clear()
        assert len({a["prompt_tokens"] for a in alone}) == len(rows)
        lengths = [a["response_tokens"] for a in alone]
        assert min(lengths) < max(lengths), lengths


def test_ablation_end_to_end_writes_the_table_and_grades_every_answer(data: Path, folders: dict[str, Path],
                                                                     tmp_path: Path) -> None:
    import jsonschema

    out = tmp_path / "eval"
    code = eval_thinker.main(["--val", str(data / "val.parquet"), "--train", str(data / "train.parquet"),
                              "--out", str(out), "--device", "cpu", "--max-new-tokens", "6",
                              f"base={folders['base']}", f"trained={folders['trained']}"])
    assert code == 0
    results = json.loads((out / eval_thinker.RESULTS_JSON).read_text())
    jsonschema.validate(results, json.loads((SCHEMA_DIR / "thinker_eval_results.schema.json").read_text()))
    assert [c["name"] for c in results["checkpoints"]] == ["base", "trained"]
    assert results["held_out"]["overlapping_ids"] == [] and results["held_out"]["eval_rows"] == 4
    assert results["decoding"]["decoding"] == "greedy" and results["decoding"]["max_new_tokens"] == 6
    assert results["decoding"]["batch_size"] == eval_thinker.DEFAULT_BATCH_SIZE
    rows = {r.id: r for r in eval_thinker.questions(data / "val.parquet", None)}
    answers = results["answers"]
    assert len(answers) == 2 * 2 * 4  # checkpoints × modes × questions
    for a in answers:  # the recipe's reward, re-run on the recorded response, gives the recorded grade
        grade = score_choice(a["response"], rows[a["id"]].truth, rows[a["id"]].options)
        assert a["correct"] == (grade["acc"] == 1.0) and a["ground_truth"] == rows[a["id"]].truth
        assert (a["audio_tokens"] > 0) == (a["mode"] == "with_audio")
    for c in results["checkpoints"]:
        for mode in eval_thinker.MODES:
            mine = [a for a in answers if a["checkpoint"] == c["name"] and a["mode"] == mode]
            assert c[mode]["correct"] == sum(a["correct"] for a in mine) and c[mode]["questions"] == 4
        assert c["audio_gap"] == pytest.approx(c["with_audio"]["accuracy"] - c["without_audio"]["accuracy"])
    report = (out / eval_thinker.REPORT_MD).read_text()
    assert "| checkpoint | with audio | without audio | gap (with - without) |" in report
    assert report.count("\n| base |") == report.count("\n| trained |") == 1


def test_a_model_that_ignores_its_input_scores_the_same_with_and_without_audio(data: Path,
                                                                               folders: dict[str, Path],
                                                                               tmp_path: Path) -> None:
    out = tmp_path / "eval"
    assert eval_thinker.main(["--val", str(data / "val.parquet"), "--train", str(data / "train.parquet"),
                              "--out", str(out), "--device", "cpu", "--max-new-tokens", "4",
                              f"base={folders['deaf']}"]) == 0
    results = json.loads((out / eval_thinker.RESULTS_JSON).read_text())
    truths = [r.truth for r in eval_thinker.questions(data / "val.parquet", None)]
    deaf = results["checkpoints"][0]
    assert all(a["response"] == DEAF_ANSWER and a["chosen"] == DEAF_ANSWER for a in results["answers"])
    expected = truths.count(DEAF_ANSWER)
    assert deaf["with_audio"]["correct"] == deaf["without_audio"]["correct"] == expected
    assert deaf["audio_gap"] == 0.0
    assert f"| base | {100 * expected / 4:.1f} % ({expected}/4) |" in (out / eval_thinker.REPORT_MD).read_text()


def test_overlap_with_training_rows_and_bad_folders_are_refused_before_loading(
        data: Path, folders: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    val, train = str(data / "val.parquet"), str(data / "train.parquet")
    args = ["--val", val, "--out", str(tmp_path / "o"), "--device", "cpu"]
    assert eval_thinker.main([*args, "--train", val, f"base={folders['base']}"]) == 1
    assert "are also in the training data" in capsys.readouterr().err
    assert eval_thinker.main([*args, "--train", val, "--allow-overlap", "--max-new-tokens", "1",
                              f"base={folders['deaf']}"]) == 0
    held = json.loads((tmp_path / "o" / eval_thinker.RESULTS_JSON).read_text())["held_out"]
    assert len(held["overlapping_ids"]) == 4 and held["allowed_overlap"] is True
    (tmp_path / "not_omni").mkdir()
    (tmp_path / "not_omni" / "config.json").write_text('{"model_type": "qwen3_tts"}')
    assert eval_thinker.main([*args, "--train", train, f"base={folders['base']}",
                              f"x={tmp_path / 'not_omni'}", f"y={tmp_path / 'missing'}"]) == 1
    err = capsys.readouterr().err
    assert "is a 'qwen3_tts' model, not Qwen3-Omni" in err and f"{tmp_path / 'missing'} does not exist" in err
    assert eval_thinker.main([*args, "--train", train, "--batch-size", "0", f"base={folders['base']}"]) == 1
    assert "--batch-size must be at least 1" in capsys.readouterr().err


def test_prepare_data_ids_are_unique_across_the_splits(data: Path) -> None:
    train = {r.id for r in eval_thinker.questions(data / "train.parquet", None)}
    val = {r.id for r in eval_thinker.questions(data / "val.parquet", None)}
    assert len(train) == 4 and len(val) == 4 and not train & val


def test_sampling_is_seeded_and_recorded(data: Path, folders: dict[str, Path], tmp_path: Path) -> None:
    runs = []
    # the default batch size, then one at a time: sampling asks one question at a time either way
    for out, batch in ((tmp_path / "a", []), (tmp_path / "b", ["--batch-size", "1"])):
        assert eval_thinker.main(["--val", str(data / "val.parquet"), "--train", str(data / "train.parquet"),
                                  "--out", str(out), "--device", "cpu", "--max-new-tokens", "8", "--limit", "2",
                                  "--temperature", "1.0", "--seed", "3", *batch, f"base={folders['trained']}"]) == 0
        runs.append(json.loads((out / eval_thinker.RESULTS_JSON).read_text()))
    assert [a["response"] for a in runs[0]["answers"]] == [a["response"] for a in runs[1]["answers"]]
    assert runs[0]["decoding"] == {"decoding": "sampling", "temperature": 1.0, "top_p": 1.0, "top_k": -1, "seed": 3,
                                   "max_new_tokens": 8, "device": "cpu", "batch_size": 1}


@pytest.mark.skipif(importlib.util.find_spec("verl") is None or importlib.util.find_spec("peft") is None,
                    reason="verl's checkpoint manager and peft are in the trainer environment only")
def test_a_lora_run_exported_by_export_checkpoint_is_evaluated(data: Path, folders: dict[str, Path],
                                                               tmp_path: Path) -> None:
    """verl's own FSDP2 save of a LoRA run from the thinker folder, merged by the export, answers like peft's merge."""
    from audio_reward.cli import main as cli
    from audio_reward.trainer_plugin.recipes.overrides import THINKER_LORA_EXCLUDE
    from tests.testkit.verl_checkpoint import write_lora_checkpoint

    step = write_lora_checkpoint(tmp_path / "checkpoints", 2, THINKER_LORA_EXCLUDE, base=folders["trained"])
    assert cli(["export-checkpoint", str(step), "--out", str(tmp_path / "merged")]) == 0
    out = tmp_path / "eval"
    assert eval_thinker.main(["--val", str(data / "val.parquet"), "--train", str(data / "train.parquet"),
                              "--out", str(out), "--device", "cpu", "--max-new-tokens", "4",
                              f"base={folders['trained']}", f"lora={tmp_path / 'merged'}"]) == 0
    results = json.loads((out / eval_thinker.RESULTS_JSON).read_text())
    assert [c["name"] for c in results["checkpoints"]] == ["base", "lora"]
    by = {(a["checkpoint"], a["mode"], a["id"]): a["response"] for a in results["answers"]}
    # the merged adapter changes the answers: the export's weights, not the base's, were asked
    assert any(by[("base", m, i)] != by[("lora", m, i)] for _, m, i in by)
