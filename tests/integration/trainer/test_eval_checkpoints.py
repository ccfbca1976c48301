"""Before/after evaluation of a tiny random Qwen3-TTS and a "trained" talker-only export of it.

The base is a tiny random Qwen3-TTS *Base* model (speaker encoder, 12 Hz
speech tokenizer) saved as Qwen3-TTS-12Hz-0.6B-Base is laid out; the
trained checkpoint is its talker with perturbed weights, saved the way
verl-omni's talker actor exports it (``talker.*`` tensors only).  Both
synthesise the held-out sentences in this TTS environment with the run's
speaker embedding, a real ``audio-reward serve`` (Whisper tiny.en) scores
them, and ``eval_results.json`` is checked against its committed schema and
against the per-utterance rows.

Runs in the TTS environment (``scripts/envs/tts.sh``); skipped where qwen-tts
is not installed:

    AUDIO_REWARD_TEST_SERVER_PYTHON=.venv/bin/python \\
        .venv-tts/bin/python -m pytest -q tests/integration/trainer/test_eval_checkpoints.py
"""

from __future__ import annotations

import importlib.util
import json
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

torch = pytest.importorskip("torch")
if importlib.util.find_spec("qwen_tts") is None:
    pytest.skip("qwen-tts is not installed (build the TTS environment with scripts/envs/tts.sh)",
                allow_module_level=True)
pytest.importorskip("pyarrow")
jsonschema = pytest.importorskip("jsonschema")

from tests.testkit import tiny_qwen3_tts as tiny  # noqa: E402

tiny.import_qwen_tts()

from audio_reward.protocol.schema import SCHEMA_DIR  # noqa: E402
from audio_reward.scorer_client.eval.evaluate import load_rows  # noqa: E402
from audio_reward.trainer_plugin.model_folder import FolderKind, inspect_folder  # noqa: E402
from audio_reward.trainer_plugin.recipes.qwen3_tts_grpo import (  # noqa: E402
    eval_checkpoints,
    prepare_data,
)
from audio_reward.trainer_plugin.recipes.qwen3_tts_grpo.splice import splice_talker  # noqa: E402

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.", "Please call Stella.", "A short one.",
    "She sells sea shells.", "Good morning everyone.", "How are you today?", "It is raining again.",
    "Bring the blue book.", "Turn left at the corner.", "The train leaves at noon.",
    # A repeat that differs only in case and punctuation: prepare_data must keep both copies on one side.
    "please call stella!",
]
LIMIT = 4


@dataclass
class Folders:
    root: Path
    base: Path
    trained: Path  # talker-only export
    trained_full: Path  # the same trained model saved whole, to check the splice against
    spk_embed: Path
    train: Path
    val: Path


def perturbed_talker(tts: tiny.TinyQwen3TTS, speaker: torch.Tensor, seed: int = 7,
                     scale: float = 0.5) -> dict[str, torch.Tensor]:
    """The talker's tensors with noise added to what GRPO trains (talker.model.*, talker.codec_head.*).

    The codec head's EOS row also points along the talker's mean hidden state, the way a
    policy rewarded for the text's length learns to stop: the random base runs to the
    frame limit, the "trained" talker stops early, so the two runs' rows really differ.
    ``tts`` is changed in place.
    """
    model = tts.model
    gen = torch.Generator().manual_seed(seed)
    out = {}
    for name, tensor in model.state_dict().items():
        if not name.startswith("talker."):
            continue
        value = tensor.detach().clone()
        if name.startswith(("talker.model.", "talker.codec_head.")) and value.is_floating_point():
            value += scale * value.std().nan_to_num(1.0).clamp(min=1e-3) * torch.randn(value.shape, generator=gen)
        out[name] = value.contiguous()
    model.load_state_dict(out, strict=False)
    hidden: list[torch.Tensor] = []
    hook = model.talker.codec_head.register_forward_hook(
        lambda _m, args, _o: hidden.append(args[0].detach().reshape(-1, args[0].shape[-1])))
    n = 4
    try:
        model.generate(input_ids=[tts.tokenize(t) for t in SENTENCES[:n]], languages=["auto"] * n,
                       voice_clone_prompt={"ref_code": [None] * n, "ref_spk_embedding": [speaker] * n,
                                           "x_vector_only_mode": [True] * n, "icl_mode": [False] * n},
                       non_streaming_mode=True, max_new_tokens=tiny.GENERATION_CONFIG["max_new_tokens"],
                       do_sample=False, subtalker_dosample=False)
    finally:
        hook.remove()
    states = torch.cat(hidden)
    direction = states.mean(0)
    weight = out["talker.codec_head.weight"]
    weight[tiny.CODEC_EOS] = direction / direction.norm() ** 2 * (states @ weight.T).max(1).values.mean()
    model.load_state_dict(out, strict=False)
    return out


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> Folders:
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("eval-ckpt")
    tts = tiny.build_tiny_qwen3_tts(seed=0, model_type="base")
    base = tiny.save_tiny_qwen3_tts(tts, root / "base")
    speaker = tiny.run_speaker_embedding(tts)
    spk = root / "voice.json"
    spk.write_text(json.dumps(speaker.tolist()))

    talker = perturbed_talker(tts, speaker)
    trained = root / "trained"
    trained.mkdir()
    shutil.copy(base / "config.json", trained / "config.json")
    save_file(talker, str(trained / "model.safetensors"), metadata={"format": "pt"})
    trained_full = tiny.save_tiny_qwen3_tts(tts, root / "trained_full")  # the same weights, saved whole

    text = root / "sentences.txt"
    text.write_text("\n".join(SENTENCES) + "\n")
    assert prepare_data.main([str(text), "--out-dir", str(root / "data"), "--val-size", "5"]) == 0
    data = root / "data"
    return Folders(root, base, trained, trained_full, spk, data / "train.parquet", data / "val.parquet")


def test_prepared_splits_are_disjoint_by_id_and_normalised_text(folders: Folders) -> None:
    import pyarrow.parquet as pq

    from audio_reward.trainer_plugin.recipes._parquet import normalize_text

    train, val = pq.read_table(folders.train).to_pylist(), pq.read_table(folders.val).to_pylist()
    assert len(train) + len(val) == len(SENTENCES) and len(val) >= 5
    ids = [r["extra_info"]["index"] for r in train + val]
    assert len(set(ids)) == len(ids)
    train_texts = {normalize_text(r["reward_model"]["ground_truth"]) for r in train}
    assert not train_texts & {normalize_text(r["reward_model"]["ground_truth"]) for r in val}
    stella = [r for r in train + val if normalize_text(r["reward_model"]["ground_truth"]) == "please call stella"]
    assert len(stella) == 2 and len({r["extra_info"]["split"] for r in stella}) == 1


def test_model_folders_are_recognised(folders: Folders) -> None:
    assert inspect_folder(folders.base).kind is FolderKind.FULL
    export = inspect_folder(folders.trained)
    assert export.kind is FolderKind.TALKER_ONLY and not export.problems
    assert not export.has_speaker_encoder and inspect_folder(folders.base).has_speaker_encoder


def test_splice_equals_the_trained_model(folders: Folders, tmp_path: Path) -> None:
    from safetensors.torch import load_file

    report = splice_talker(inspect_folder(folders.base), inspect_folder(folders.trained), tmp_path / "spliced")
    spliced = load_file(str(tmp_path / "spliced" / "model.safetensors"))
    full = load_file(str(folders.trained_full / "model.safetensors"))
    base = load_file(str(folders.base / "model.safetensors"))
    assert report.replaced == len(load_file(str(folders.trained / "model.safetensors")))
    assert report.kept == sum(k.startswith("speaker_encoder.") for k in base)
    assert spliced.keys() == full.keys()
    for key in full:
        torch.testing.assert_close(spliced[key], full[key], rtol=0, atol=0)
    changed = [k for k in base if not torch.equal(base[k], spliced[k])]
    assert changed and all(k.startswith(("talker.model.", "talker.codec_head.")) for k in changed)
    # Loaded through qwen-tts, the splice synthesises exactly what the whole trained model does.
    from qwen_tts import Qwen3TTSModel
    from qwen_tts.inference.qwen3_tts_model import VoiceClonePromptItem

    vector = torch.tensor(json.loads(folders.spk_embed.read_text()))
    voice = VoiceClonePromptItem(ref_code=None, ref_spk_embedding=vector, x_vector_only_mode=True, icl_mode=False)
    waves = []
    for folder in (tmp_path / "spliced", folders.trained_full):
        model = Qwen3TTSModel.from_pretrained(str(folder), device_map="cpu", dtype=torch.float32)
        wavs, rate = model.generate_voice_clone(text=SENTENCES[0], language="Auto", voice_clone_prompt=[voice],
                                                non_streaming_mode=True, do_sample=False, subtalker_dosample=False)
        waves.append(wavs[0])
    assert rate == 24000 and np.array_equal(waves[0], waves[1])


@pytest.fixture(scope="module")
def evaluation(folders: Folders, scorer_url: str) -> Iterator[Path]:
    out = folders.root / "eval"
    code = eval_checkpoints.main([
        f"base={folders.base}", f"step1={folders.trained}", "--val", str(folders.val), "--train", str(folders.train),
        "--spk-embed", str(folders.spk_embed), "--url", scorer_url, "--out", str(out), "--device", "cpu",
        "--limit", str(LIMIT), "--greedy", "--max-new-tokens", str(tiny.GENERATION_CONFIG["max_new_tokens"])])
    assert code == 0
    yield out


def test_sampled_evaluation_records_its_decoding_and_spread(folders: Folders, scorer_url: str,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    out = folders.root / "eval-sampled"
    args = [f"base={folders.base}", f"step1={folders.trained}", "--val", str(folders.val), "--train",
            str(folders.train), "--spk-embed", str(folders.spk_embed), "--url", scorer_url, "--out", str(out),
            "--device", "cpu", "--limit", "2", "--samples", "2", "--max-new-tokens", "20"]
    assert eval_checkpoints.main(args) == 0
    results = json.loads((out / "eval_results.json").read_text())
    jsonschema.validate(results, json.loads((SCHEMA_DIR / "eval_results.schema.json").read_text()))
    synthesis = results["synthesis"]
    assert synthesis["samples"] == 2 and synthesis["temperature"] == 1.0 and synthesis["top_k"] == -1
    assert synthesis["max_new_tokens"] == 20 and synthesis["decoding"].startswith("sampling")
    for stats in results["checkpoints"]:
        rows = _rows(out / stats["name"] / "eval")
        assert stats["count"] == 4 and len({r["text"] for r in rows}) == 2
        per_text = [np.mean([r["cer"] for r in rows if r["text"] == t]) for t in sorted({r["text"] for r in rows})]
        assert stats["sem_cer"] == pytest.approx(np.std(per_text, ddof=1) / np.sqrt(2))
    # fixed seeds: the same samples again, bit for bit; another seed draws others
    rows, embedding, _ = eval_checkpoints.check_inputs(eval_checkpoints.parse_checkpoints(args[:2]), folders.spk_embed,
                                                       folders.val, [folders.train], 2, allow_overlap=False)
    again, other = folders.root / "again", folders.root / "other"
    decoding = eval_checkpoints.Decoding(max_new_tokens=20, samples=2)
    eval_checkpoints.synthesize(folders.base, rows, embedding, "Auto", again, "cpu", decoding)
    eval_checkpoints.synthesize(folders.base, rows, embedding, "Auto", other, "cpu",
                                eval_checkpoints.Decoding(max_new_tokens=20, samples=2, seed=1))
    wavs = sorted((out / "base" / "audio").glob("*.wav"))
    assert len(wavs) == 4 and all(w.read_bytes() == (again / w.name).read_bytes() for w in wavs)
    assert any(w.read_bytes() != (other / w.name).read_bytes() for w in wavs)
    # a rerun into the same folder with other decoding is refused instead of mixing the two
    assert eval_checkpoints.main([*args, "--greedy"]) == 1
    assert "decoded with other settings" in capsys.readouterr().err


def _rows(run: Path) -> list[dict[str, Any]]:
    summary = json.loads((run / "summary.json").read_text())
    latest = load_rows(run / "utterances.jsonl")
    return [latest[i] for i in summary["ids"]]


def test_eval_results_valid_and_equal_to_the_rows(evaluation: Path) -> None:
    results = json.loads((evaluation / "eval_results.json").read_text())
    schema = json.loads((SCHEMA_DIR / "eval_results.schema.json").read_text())
    jsonschema.validate(results, schema)
    assert results["base"] == "base" and [c["name"] for c in results["checkpoints"]] == ["base", "step1"]
    assert results["scoring"]["engine.model_id"] == "tiny.en" and results["scorer"]["engine"]["name"]
    assert results["held_out"]["overlapping_ids"] == [] and results["held_out"]["eval_rows"] == LIMIT
    assert results["synthesis"]["tts_language"] == "Auto"
    lines = (evaluation / "base" / "audio" / "manifest.jsonl").read_text().splitlines()
    manifest = [json.loads(line) for line in lines]
    assert len(manifest) == LIMIT and {m["language"] for m in manifest} == {"en"}  # the rows' language, to the scorer
    rows = {name: _rows(evaluation / name / "eval") for name in ("base", "step1")}
    for stats in results["checkpoints"]:
        mine = rows[stats["name"]]
        ok = [r for r in mine if r["status"] == "ok"]
        assert stats["count"] == LIMIT and stats["failures"] == LIMIT - len(ok) == 0
        for key in ("cer", "wer", "duration_ratio"):
            values = [r[key] for r in ok]
            assert stats[f"mean_{key}"] == pytest.approx(float(np.mean(values)))
            assert stats[f"median_{key}"] == pytest.approx(float(np.median(values)))
        assert stats["mean_reward"] == pytest.approx(float(np.mean([r["score"] for r in ok])))
        assert stats["signals"] == {}  # a scorer without speaker and quality models answers neither
    (comparison,) = results["comparisons"]
    assert comparison["paired"] == LIMIT
    base_rows = {r["id"]: r for r in rows["base"]}
    for delta in comparison["utterances"]:
        after = next(r for r in rows["step1"] if r["id"] == delta["id"])
        assert delta["delta_cer"] == pytest.approx(after["cer"] - base_rows[delta["id"]]["cer"])
        assert delta["delta_score"] == pytest.approx(after["score"] - base_rows[delta["id"]]["score"])
    assert comparison["improved"] + comparison["worse"] + comparison["unchanged"] == LIMIT
    for name in ("compare.png", "report.html", "deltas.jsonl"):
        assert (evaluation / name).is_file() and name in results["plots"]


@pytest.fixture(scope="module")
def signals_evaluation(folders: Folders, signals_url: str) -> tuple[Path, str]:
    """The evaluation against a scorer with resemblyzer and DNSMOS, on rows prepared with a speaker reference."""
    import soundfile as sf

    from tests.testkit.speech import espeak_available, espeak_speech

    if not espeak_available():
        pytest.skip("espeak-ng is not installed: it speaks the reference recording")
    voice, rate = espeak_speech(SENTENCES[0], "en-us+f4")
    reference = folders.root / "reference.wav"
    sf.write(reference, voice, rate)
    text = folders.root / "sentences.txt"
    data = folders.root / "data-speaker"
    assert prepare_data.main([str(text), "--out-dir", str(data), "--val-size", "5",
                              "--speaker-reference", str(reference)]) == 0
    out = folders.root / "eval-signals"
    code = eval_checkpoints.main([
        f"base={folders.base}", f"step1={folders.trained}", "--val", str(data / "val.parquet"), "--train",
        str(data / "train.parquet"), "--spk-embed", str(folders.spk_embed), "--url", signals_url, "--out", str(out),
        "--device", "cpu", "--limit", "2", "--greedy",
        "--max-new-tokens", str(tiny.GENERATION_CONFIG["max_new_tokens"])])
    assert code == 0
    return out, str(reference.resolve())


def test_eval_results_carry_speaker_similarity_and_dnsmos(signals_evaluation: tuple[Path, str],
                                                          folders: Folders) -> None:
    out, reference = signals_evaluation
    results = json.loads((out / "eval_results.json").read_text())
    jsonschema.validate(results, json.loads((SCHEMA_DIR / "eval_results.schema.json").read_text()))
    manifest = [json.loads(line) for line in (out / "base" / "audio" / "manifest.jsonl").read_text().splitlines()]
    assert {m["speaker_reference"] for m in manifest} == {reference}
    for stats in results["checkpoints"]:
        ok = [r for r in _rows(out / stats["name"] / "eval") if r["status"] == "ok"]
        assert len(ok) == 2
        assert set(stats["signals"]) == {"speaker_similarity", "dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak",
                                         "dnsmos_p808"}
        for key, figures in stats["signals"].items():
            values = [r[key] for r in ok]
            assert figures == {"mean": pytest.approx(float(np.mean(values))),
                               "median": pytest.approx(float(np.median(values))), "count": 2}
        assert all(-1.0 <= r["speaker_similarity"] <= 1.0 and 1.0 <= r["dnsmos_ovrl"] <= 5.0 for r in ok)
        assert all(r["score"] == r["reward_asr"] for r in ok)  # measured, not weighed: the reward is the CER's
    report = (out / "report.html").read_text()
    assert "Speaker similarity and speech quality" in report and "dnsmos_ovrl median" in report
    # --speaker-reference names another recording for every row, whatever the rows say
    rows, embedding, _ = eval_checkpoints.check_inputs(
        eval_checkpoints.parse_checkpoints([f"base={folders.base}", f"step1={folders.trained}"]), folders.spk_embed,
        folders.val, [folders.train], 2, allow_overlap=False)
    other = folders.root / "other-reference.wav"
    eval_checkpoints.synthesize(folders.base, rows, embedding, "Auto", out / "base" / "audio", "cpu",
                                eval_checkpoints.Decoding(greedy=True, max_new_tokens=tiny.GENERATION_CONFIG[
                                    "max_new_tokens"]), speaker_reference=other)
    manifest = [json.loads(line) for line in (out / "base" / "audio" / "manifest.jsonl").read_text().splitlines()]
    assert {m["speaker_reference"] for m in manifest} == {str(other.resolve())}


def test_compare_plot_shows_the_signals_beside_the_cer(signals_evaluation: tuple[Path, str],
                                                      evaluation: Path) -> None:
    from audio_reward.scorer_client.eval.compare import Run
    from audio_reward.scorer_client.eval.report import compare_figure

    out, _ = signals_evaluation
    runs = [Run.load(out / name / "eval", name=name) for name in ("base", "step1")]
    titles = [ax.get_title() for ax in compare_figure([(r.name, r.rows) for r in runs]).axes]
    assert len(titles) == 4 and "speaker similarity" in titles[2] and "DNSMOS overall" in titles[3]
    plain = [Run.load(evaluation / name / "eval", name=name) for name in ("base", "step1")]
    assert len(compare_figure([(r.name, r.rows) for r in plain]).axes) == 2  # no signals, no panels for them


def test_trained_talker_speaks_differently(evaluation: Path) -> None:
    import soundfile as sf

    for wav in sorted((evaluation / "base" / "audio").glob("*.wav")):
        before, _ = sf.read(wav)
        after, _ = sf.read(evaluation / "step1" / "audio" / wav.name)
        assert after.shape[0] < before.shape[0]  # the trained talker learned to stop
    results = json.loads((evaluation / "eval_results.json").read_text())
    base, step1 = results["checkpoints"]
    assert step1["mean_duration_ratio"] < base["mean_duration_ratio"]
    assert all(d["duration_ratio"] < d["base_duration_ratio"] for d in results["comparisons"][0]["utterances"])


def test_overlap_is_refused(folders: Folders, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    args = [f"base={folders.base}", f"step1={folders.trained}", "--spk-embed", str(folders.spk_embed),
            "--out", str(tmp_path / "x"), "--device", "cpu", "--url", "http://127.0.0.1:9"]
    # The training parquet evaluated as if held out: every id and text overlaps.
    assert eval_checkpoints.main([*args, "--val", str(folders.train), "--train", str(folders.train)]) == 1
    err = capsys.readouterr().err
    assert "also in the training data" in err and "--allow-overlap" in err
    assert not (tmp_path / "x").exists()  # refused before anything was written
    rows, _, held = eval_checkpoints.check_inputs(eval_checkpoints.parse_checkpoints(args[:2]), folders.spk_embed,
                                                  folders.train, [folders.train], None, allow_overlap=True)
    assert held["overlapping_ids"] == [r.id for r in rows] and held["allowed_overlap"]


def test_each_bad_folder_fails_the_input_check_with_its_own_line(folders: Folders, tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    custom = tiny.save_tiny_qwen3_tts(tiny.build_tiny_qwen3_tts(seed=0), tmp_path / "custom_voice")
    broken = tmp_path / "broken"
    shutil.copytree(folders.base, broken)
    data = (broken / "model.safetensors").read_bytes()
    (broken / "model.safetensors").write_bytes(data[: len(data) // 2])
    wrong_voice = tmp_path / "voice.json"
    wrong_voice.write_text(json.dumps([0.1] * 7))
    code = eval_checkpoints.main([
        f"base={custom}", "hub=Qwen/Qwen3-TTS-12Hz-0.6B-Base", f"broken={broken}", "--val", str(folders.val),
        "--train", str(folders.train), "--spk-embed", str(wrong_voice), "--out", str(tmp_path / "out"),
        "--device", "cpu", "--url", "http://127.0.0.1:9"])
    assert code == 1
    lines = capsys.readouterr().err.strip().splitlines()
    assert all(line.startswith("eval_checkpoints: ") for line in lines)
    text = "\n".join(lines)
    assert "no speaker-encoder weights" in text
    assert "hub id" in text and "download it first" in text
    assert "not a readable safetensors file" in text
    assert "7 values" in text
    assert len(lines) >= 4 and not (tmp_path / "out").exists()
