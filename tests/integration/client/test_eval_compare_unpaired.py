"""``eval --compare`` of runs that hold different utterances leads with the paired figures.

Run A scored four sentences said right and two said wrong; run B the same four and one more, all said
right. Their own mean CERs differ a lot, while on the four utterances both hold nothing changed: the printed
comparison must put the paired figures first and say how many rows each side had.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import soundfile as sf

from audio_reward.cli import main
from tests.testkit.speech import synth_speech

SAID = ["The quick brown fox jumps over the lazy dog.", "Please call Stella.", "Good morning everyone.",
        "She sells sea shells by the shore."]
WRONG = [("Seven purple elephants were painting the kitchen.", "Call me tomorrow at noon."),
         ("Reinforcement learning rewards speech.", "The weather is cold today.")]
EXTRA = "How much wood would a woodchuck chuck?"


def _run(root: Path, name: str, rows: list[tuple[str, str, str]], url: str) -> Path:
    """``eval`` of rows ``(id, spoken, target text)`` on the real scorer; the run's folder."""
    audio = root / f"{name}_audio"
    audio.mkdir()
    manifest = []
    for utt_id, spoken, text in rows:
        samples, rate = synth_speech(spoken)
        sf.write(audio / f"{utt_id}.wav", samples, rate)
        manifest.append({"id": utt_id, "audio": f"{utt_id}.wav", "text": text})
    (audio / "manifest.jsonl").write_text("".join(json.dumps(r) + "\n" for r in manifest))
    out = root / f"run_{name}"
    assert main(["eval", str(audio / "manifest.jsonl"), "--out", str(out), "--url", url, "--no-progress"]) == 0
    return out


def test_compare_of_runs_with_different_utterances_leads_with_the_paired_figures(
        scorer_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    same = [(f"u{i}", text, text) for i, text in enumerate(SAID)]
    a = _run(tmp_path, "a", [*same, *[(f"w{i}", spoken, text) for i, (spoken, text) in enumerate(WRONG)]],
             scorer_url)
    b = _run(tmp_path, "b", [*same, ("x0", EXTRA, EXTRA)], scorer_url)
    capsys.readouterr()
    assert main(["eval", "--compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out.splitlines()
    (comp,) = json.loads((tmp_path / "cmp" / "eval_results.json").read_text())["comparisons"]
    assert comp["paired"] == 4 and comp["mean_delta_cer"] == pytest.approx(0.0, abs=1e-9)
    # The paired comparison first, with each side's row count; then why the table's means differ.
    assert printed[0].startswith("run_b vs run_a: 4 paired (run_a has 6 rows, run_b 5), ")
    paired = re.search(r"; paired mean CER (\S+) % → (\S+) %, mean CER change \+0\.00 pp$", printed[0])
    assert paired is not None and paired[1] == paired[2], printed[0]
    assert printed[1] == ("  not paired: 2 only in run_a, 1 only in run_b; the table's means are over each run's "
                          "own rows, so compare the paired figures above")
    table = printed.index("| run | count | failures | timeouts | CER mean | CER median | WER mean | WER median | "
                          "duration ratio mean | duration ratio median | reward mean |")
    assert table > 1
