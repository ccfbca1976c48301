"""``audio-reward eval --compare``: two runs of the same sentences, scored by a real server, compared.

Run A is natural TTS speech (hibari), run B robotic speech (espeak-ng) of
the same texts, like a base and a weaker checkpoint; Whisper tiny.en on a
real ``audio-reward serve`` scores both.  ``eval_results.json`` must be
valid against its committed schema and hold exactly the figures recomputed
from the two runs' rows.
"""

from __future__ import annotations

import base64
import hashlib
import html
import itertools
import json
import os
import re
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pytest
import soundfile as sf

from audio_reward.cli import main
from audio_reward.protocol.schema import SCHEMA_DIR
from audio_reward.scorer_client.eval.evaluate import load_rows
from audio_reward.scorer_client.eval.report import compare_figure
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
    """Two runs made as a user makes them: in each audio folder, ``eval manifest.jsonl --out ../run_X``.

    Both manifests are called ``manifest.jsonl`` and name the same files (``u0.wav``…), so
    recordings found through the working folder instead of each run's own would be the other run's.
    """
    root = tmp_path_factory.mktemp("compare")
    for name, synth, missing in (("a", synth_speech, False), ("b", espeak_speech, True)):
        _manifest(root / f"{name}_audio", synth, missing)
        with pytest.MonkeyPatch.context() as mp:
            mp.chdir(root / f"{name}_audio")
            assert main(["eval", "manifest.jsonl", "--out", f"../run_{name}", "--url", scorer_url,
                         "--no-progress"]) == (0 if name == "a" else 1)
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


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _played(page: str) -> dict[str, list[str]]:
    """The SHA-256 of every recording a report embeds in an utterance row, by id, in column order."""
    return {uid: [hashlib.sha256(base64.b64decode(b)).hexdigest()
                  for b in re.findall(r'src="data:audio/wav;base64,([^"]+)"', cells)]
            for uid, cells in re.findall(r"<tr><td>(u\d+)</td>(.*?)</tr>", page, flags=re.S)}


@pytest.mark.parametrize("where", ["a_audio", "elsewhere"])
def test_compare_from_another_folder_plays_each_runs_own_recordings(
        runs: tuple[Path, Path, Path], where: str, capsys: pytest.CaptureFixture[str]) -> None:
    # From a_audio, audio looked up through the working folder would be run A's in both columns;
    # from an unrelated folder, there would be none.
    root, a, b = runs
    cwd = root / where
    cwd.mkdir(exist_ok=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(cwd)
        assert main(["eval", "--compare", os.path.relpath(a, cwd), os.path.relpath(b, cwd), "--out", "cmp"]) == 0
    page = (cwd / "cmp" / "report.html").read_text()
    played = _played(page)
    # The table of increases shows the utterances whose CER rose, each with both runs' recordings.
    risen = json.loads((cwd / "cmp" / "eval_results.json").read_text())["comparisons"][0]["utterances"]
    assert played and sorted(played) == sorted(d["id"] for d in risen if (d["delta_cer"] or 0) > 0)
    for uid, hashes in played.items():
        assert hashes == [_sha256(root / "a_audio" / f"{uid}.wav"), _sha256(root / "b_audio" / f"{uid}.wav")], uid
    assert "not shown" not in page and "not shown" not in capsys.readouterr().err


def test_compare_names_a_missing_or_changed_recording(runs: tuple[Path, Path, Path], scorer_url: str,
                                                      tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, a, _ = runs
    audio, run_c = tmp_path / "c_audio", tmp_path / "run_c"
    shutil.copytree(root / "b_audio", audio)
    assert main(["eval", str(audio / "manifest.jsonl"), "--out", str(run_c), "--url", scorer_url,
                 "--no-progress"]) == 1
    (audio / "u0.wav").unlink()  # moved away after scoring
    shutil.copy(root / "a_audio" / "u1.wav", audio / "u1.wav")  # run A's recording under run C's file name
    capsys.readouterr()
    assert main(["eval", "--compare", str(a), str(run_c), "--out", str(tmp_path / "cmp")]) == 0
    page = html.unescape((tmp_path / "cmp" / "report.html").read_text())
    played = _played(page)
    own_a = {uid: _sha256(root / "a_audio" / f"{uid}.wav") for uid in played}
    assert played["u0"] == [own_a["u0"]] and played["u1"] == [own_a["u1"]]  # nothing in run C's column
    others = sorted(set(played) - {"u0", "u1"})  # the table lists the utterances whose CER rose
    assert others
    for uid in others:
        assert played[uid] == [own_a[uid], _sha256(audio / f"{uid}.wav")]
    assert f"run_c: u0.wav not shown: not found in {audio}" in page
    assert f"run_c: u1.wav not shown: {audio / 'u1.wav'} is not the file the run scored" in page
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "2 recording(s) not shown in report.html" in err


def _overlapping_labels(fig: Any) -> list[tuple[str, str]]:
    """Pairs of x tick labels, x-axis labels and titles whose drawn boxes overlap, or that leave the figure."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    texts = [t for ax in fig.axes for t in [*ax.get_xticklabels(), ax.xaxis.label, ax.title]
             if t.get_visible() and t.get_text()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts]
    clash = [(x, y) for (x, bx), (y, by) in itertools.combinations(boxes, 2) if bx.overlaps(by)]
    outside = [(x, "outside the figure") for x, bx in boxes
               if bx.x0 < fig.bbox.x0 or bx.x1 > fig.bbox.x1 or bx.y0 < fig.bbox.y0 or bx.y1 > fig.bbox.y1]
    return clash + outside


@pytest.mark.parametrize("names", [("run_a", "run_b"), ("step500/eval", "step1000/eval"),
                                   ("base", "global_step_1000_lr1e-6_kl0.01_seed3")])
def test_compare_plot_labels_do_not_overlap(runs: tuple[Path, Path, Path], names: tuple[str, str]) -> None:
    import matplotlib.pyplot as plt

    _, a, b = runs
    fig = compare_figure([(names[0], _ordered_rows(a)), (names[1], _ordered_rows(b))])
    try:
        assert _overlapping_labels(fig) == []
    finally:
        plt.close(fig)


def test_reports_read_as_text(runs: tuple[Path, Path, Path], capsys: pytest.CaptureFixture[str]) -> None:
    root, a, b = runs
    out = root / "cmp_text"
    assert main(["eval", "--compare", str(a), str(b), "--out", str(out)]) == 0
    # A change of CER is said in percentage points, signed: "+12.34 pp", not "12.34 %".
    assert re.search(r"mean CER change \+\d+\.\d\d pp", capsys.readouterr().out)
    compare_page, run_page = (out / "report.html").read_text(), (a / "report.html").read_text()
    assert "mean CER change (percentage points)</th><td>+" in compare_page
    assert re.search(r"<td class=num>[+-]\d+\.\d pp</td>", compare_page)
    for page in (compare_page, run_page):
        scorer = page.split("<h2>Scorer</h2>")[1].split("</table>")[0]
        values = re.findall(r"<td>(.*?)</td>", scorer)
        assert values and not [v for v in values if v in ("None", "True", "False") or v.startswith(("{", "["))]
        assert "<th>reward.formula</th><td>1-cer</td>" in scorer and "<th>preset</th><td>not set</td>" in scorer
        # The players know each clip's length before it is played.
        players = re.findall(r"<audio[^>]*>", page)
        assert players and all('preload="metadata"' in p for p in players)


def test_largest_cer_increases_lists_increases_only(runs: tuple[Path, Path, Path]) -> None:
    """Issue 40, finding 5: compared the other way round (robotic speech as the base), most utterances improve;
    the table of increases must not list them as its largest 'increases' (negative pp)."""
    root, a, b = runs
    out = root / "cmp_reversed"
    assert main(["eval", "--compare", str(b), str(a), "--out", str(out)]) == 0
    results = json.loads((out / "eval_results.json").read_text())
    deltas = [d["delta_cer"] for d in results["comparisons"][0]["utterances"] if d["delta_cer"] is not None]
    assert any(d < 0 for d in deltas), "the reversed comparison should hold improvements"
    section = (out / "report.html").read_text().split("<h3>Largest CER increases</h3>")[1].split("<h2>")[0]
    changes = re.findall(r"<td class=num>([+-]\d+\.\d) pp</td>", section)
    assert all(c.startswith("+") for c in changes), changes
    assert len(changes) == sum(d > 0 for d in deltas)
    if not changes:
        assert "No paired utterance's CER rose." in section
