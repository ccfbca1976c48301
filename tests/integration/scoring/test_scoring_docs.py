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
