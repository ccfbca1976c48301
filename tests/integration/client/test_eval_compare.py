"""``audio-reward eval --compare``: two runs of the same sentences, scored by a real server, compared.

Run A is natural TTS speech (hibari), run B robotic speech (espeak-ng) of
the same texts, like a base and a weaker checkpoint; Whisper tiny.en on a
real ``audio-reward serve`` scores both.  ``eval_results.json`` must be
valid against its committed schema and hold exactly the figures recomputed
from the two runs' rows.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import jsonschema
import numpy as np
import pytest
import soundfile as sf

from audio_reward.cli import main
from audio_reward.protocol.schema import SCHEMA_DIR
from audio_reward.scorer_client.eval.evaluate import load_rows
from tests.testkit.speech import espeak_available, espeak_speech, synth_speech

pytestmark = pytest.mark.skipif(not espeak_available(), reason="espeak-ng is not installed (apt-get install espeak-ng)")

TEXTS = ["The quick brown fox jumps over the lazy dog.", "Please call Stella.", "She sells sea shells by the shore.",
         "Good morning everyone.", "How much wood would a woodchuck chuck?"]


def _manifest(root: Path, synth, extra_missing: bool) -> Path:
    root.mkdir(parents=True)
    rows = []
    for i, text in enumerate(TEXTS):
        audio, rate = synth(text)
        sf.write(root / f"u{i}.wav", audio, rate)
        rows.append({"id": f"u{i}", "audio": f"u{i}.wav", "text": text})
    if extra_missing:  # an utterance that failed to synthesise: a failure on one side only
        rows.append({"id": "u9", "audio": "u9.wav", "text": "Never written."})
    (root / "manifest.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return root / "manifest.jsonl"


@pytest.fixture(scope="module")
def runs(scorer_url: str, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    root = tmp_path_factory.mktemp("compare")
    for name, synth, missing in (("a", synth_speech, False), ("b", espeak_speech, True)):
        manifest = _manifest(root / f"{name}_audio", synth, missing)
        main(["eval", str(manifest), "--out", str(root / f"run_{name}"), "--url", scorer_url, "--no-progress"])
    return root, root / "run_a", root / "run_b"


def _ordered_rows(run: Path) -> list[dict]:
    latest = load_rows(run / "utterances.jsonl")
    return [latest[i] for i in json.loads((run / "summary.json").read_text())["ids"]]


def test_compare_writes_deltas_equal_to_the_rows(runs: tuple[Path, Path, Path],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    root, a, b = runs
    out = root / "cmp"
    assert main(["eval", "--compare", str(a), str(b), "--out", str(out)]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    jsonschema.validate(results, json.loads((SCHEMA_DIR / "eval_results.schema.json").read_text()))
    rows_a, rows_b = _ordered_rows(a), _ordered_rows(b)
    stats_a, stats_b = results["checkpoints"]
    assert (stats_a["name"], stats_b["name"]) == ("run_a", "run_b")
    assert (stats_a["count"], stats_a["failures"]) == (5, 0) and (stats_b["count"], stats_b["failures"]) == (6, 1)
    for stats, rows in ((stats_a, rows_a), (stats_b, rows_b)):
        ok = [r for r in rows if r["status"] == "ok"]
        assert stats["mean_cer"] == pytest.approx(np.mean([r["cer"] for r in ok]))
        assert stats["median_cer"] == pytest.approx(np.median([r["cer"] for r in ok]))
        assert stats["mean_wer"] == pytest.approx(np.mean([r["wer"] for r in ok]))
        assert stats["mean_duration_ratio"] == pytest.approx(np.mean([r["duration_ratio"] for r in ok]))
        assert stats["median_duration_ratio"] == pytest.approx(np.median([r["duration_ratio"] for r in ok]))
        assert stats["mean_reward"] == pytest.approx(np.mean([r["score"] for r in ok]))
    # Robotic speech reads worse than natural speech: the comparison must say so.
    assert stats_b["mean_cer"] > stats_a["mean_cer"]
    (comp,) = results["comparisons"]
    assert comp["paired"] == 5 and comp["only_in_checkpoint"] == ["u9"] and comp["only_in_base"] == []
    by_id = {r["id"]: r for r in rows_a}
    deltas = [r["cer"] - by_id[r["id"]]["cer"] for r in rows_b if r["id"] in by_id]
    assert [d["delta_cer"] for d in comp["utterances"]] == pytest.approx(deltas)
    assert comp["worse"] == sum(d > 0 for d in deltas) and comp["improved"] == sum(d < 0 for d in deltas)
    assert comp["mean_delta_cer"] == pytest.approx(np.mean(deltas)) and comp["mean_delta_cer"] > 0
    lines = [json.loads(line) for line in (out / "deltas.jsonl").read_text().splitlines()]
    assert [d["id"] for d in lines] == [d["id"] for d in comp["utterances"]]
    assert results["scoring"]["engine.model_id"] == "tiny.en"
    printed = capsys.readouterr().out
    assert "run_b vs run_a: 5 paired" in printed
    page = (out / "report.html").read_text()
    assert all(s.startswith("data:") for s in re.findall(r'src="([^"]+)"', page))
    assert (out / "compare.png").read_bytes()[:4] == b"\x89PNG"


def test_compare_refuses_runs_not_scored_alike(runs: tuple[Path, Path, Path],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    root, a, b = runs
    other = root / "run_b_other_reward"
    shutil.copytree(b, other)
    info = json.loads((other / "scorer.json").read_text())
    info["reward"]["formula"] = "exp"
    (other / "scorer.json").write_text(json.dumps(info))
    capsys.readouterr()
    assert main(["eval", "--compare", str(a), str(other), "--out", str(root / "refused")]) == 2
    err = capsys.readouterr().err
    assert "not scored alike" in err and "reward" in err and '"formula": "exp"' in err
    assert not (root / "refused" / "eval_results.json").exists()


def test_compare_names_a_folder_that_is_not_a_run(runs: tuple[Path, Path, Path], tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    _, a, _ = runs
    assert main(["eval", "--compare", str(a), str(tmp_path), "--out", str(tmp_path / "o")]) == 2
    assert "is not a finished `audio-reward eval` run: summary.json is missing" in capsys.readouterr().err
