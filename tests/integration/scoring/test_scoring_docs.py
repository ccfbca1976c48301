"""docs/scoring.md says what the code does: its Python snippets, its mode-difference table
and its ``audio-reward error-rate`` example are run here."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from audio_reward.scoring import compare_texts, get_normalizer

REPO = Path(__file__).resolve().parents[3]
DOC = (REPO / "docs" / "scoring.md").read_text(encoding="utf-8")


def _blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", DOC, flags=re.DOTALL | re.MULTILINE)


@pytest.mark.parametrize("code", _blocks("python"))
def test_python_snippets_run(code: str) -> None:
    exec(compile(code, "docs/scoring.md", "exec"), {})


def _cell_text(cell: str) -> tuple[str, str]:
    """The backticked text of a table cell (escapes \\t, \\uXXXX written out) and its language."""
    text = re.search(r"`([^`]*)`", cell).group(1)  # type: ignore[union-attr]
    text = re.sub(r"\\u([0-9a-f]{4})", lambda m: chr(int(m.group(1), 16)), text).replace("\\t", "\t")
    for form in ("NFC", "NFD"):
        if f"({form})" in cell:
            text = unicodedata.normalize(form, text)
    return text, "zh" if "(zh)" in cell else "en"


def _difference_rows() -> list[list[str]]:
    table = DOC[DOC.index("| reference | hypothesis | `seed-tts-eval` | `basic` |"):]
    rows = []
    for line in table.splitlines()[2:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip() for cell in line.strip("|").split("|")])
    return rows


def test_the_difference_table_has_its_rows() -> None:
    assert len(_difference_rows()) == 8


@pytest.mark.parametrize("row", _difference_rows(), ids=lambda row: row[0])
def test_the_difference_table_is_what_the_modes_compute(row: list[str]) -> None:
    reference, language = _cell_text(row[0])
    hypothesis, _ = _cell_text(row[1])
    metric, value = re.match(r"(WER|CER) ([0-9.]+)", row[2]).groups()  # type: ignore[union-attr]
    seed = compare_texts(reference, hypothesis, normalizer=get_normalizer("seed-tts-eval"), language=language)
    assert getattr(seed.rates, metric.lower()) == pytest.approx(float(value))
    basic = compare_texts(reference, hypothesis, normalizer=get_normalizer("basic"), language=language)
    assert row[3].startswith("0") and (basic.rates.cer, basic.rates.wer) == (0.0, 0.0)


def test_the_error_rate_example_prints_what_the_doc_shows(tmp_path: Path) -> None:
    (example,) = [block for block in _blocks("console") if "audio-reward error-rate" in block]
    lines = example.splitlines()
    command_at = next(i for i, line in enumerate(lines) if line.startswith("$ audio-reward error-rate"))
    assert lines[0] == "$ cat transcripts.jsonl"
    (tmp_path / "transcripts.jsonl").write_text("\n".join(lines[1:command_at]) + "\n", encoding="utf-8")
    args = lines[command_at].split()[2:]
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", *args], cwd=tmp_path,
                          capture_output=True, env=env, timeout=120, check=False)
    assert proc.returncode == 1, proc.stderr  # the doc says: 1, one line refused
    assert proc.stdout.decode().splitlines() == lines[command_at + 1:]


def _expected_rewards() -> list[tuple[str | None, list[float]]]:
    """The rows of "What rewards to expect": the spoken sentence (None: silence) and CER, 1-cer, exp, tanh."""
    section = DOC.split("### What rewards to expect", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) != 5 or not re.fullmatch(r"[\d.]+", cells[1]):
            continue
        spoken = re.match(r"`([^`]+)`", cells[0])
        rows.append((spoken[1] if spoken else None, [float(c) for c in cells[1:]]))
    return rows


def test_the_rewards_to_expect_are_what_the_server_gives(signals_url: str) -> None:
    import numpy as np

    from audio_reward.scorer_client import ScorerClient
    from tests.testkit.speech import synth_speech

    target = "The quick brown fox jumps over the lazy dog."
    rows = _expected_rewards()
    assert len(rows) == 4 and rows[-1][0] is None
    section = DOC.split("### What rewards to expect", 1)[1]
    silence = np.zeros(3 * 16_000, np.float32)
    with ScorerClient(signals_url) as client:
        for spoken, (cer, *rewards) in rows:
            audio, rate = synth_speech(spoken) if spoken is not None else (silence, 16_000)
            got = [client.score(audio, rate, target, reward={"formula": f}) for f in ("1-cer", "exp", "tanh")]
            assert float(got[0].diagnostics["cer"]) == pytest.approx(cer, abs=0.002), spoken  # type: ignore[arg-type]
            assert [r.score for r in got] == pytest.approx(rewards, abs=0.002), spoken
        quiet = client.score(silence, 16_000, target, reward={"quality_weight": 0.2}).score
        said = client.score(*synth_speech(target), target, reward={"quality_weight": 0.2}).score
    assert f"earns `0.2 · (1.84 - 1) / 4 = {quiet:.3f}`" in section
    assert f"the target\n  earns {said:.3f}" in section
