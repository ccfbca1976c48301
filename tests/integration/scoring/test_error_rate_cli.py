"""``audio-reward error-rate``: the real command, run as a subprocess on JSONL files and stdin."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from audio_reward.scoring import (
    RewardPolicy,
    get_normalizer,
    score_transcript,
)

REPO = Path(__file__).resolve().parents[3]


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    env = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run([sys.executable, "-m", "audio_reward.cli", "error-rate", *args],
                          input=stdin, capture_output=True, env=env, timeout=120, check=False)


def lines(out: bytes) -> list[dict]:
    return [json.loads(line) for line in out.decode().splitlines()]


def jsonl(*objects: object) -> bytes:
    return b"".join(json.dumps(o, ensure_ascii=False).encode() + b"\n" for o in objects)


GOOD = [
    {"id": "en-1", "reference": "Hello, world! It's a test.", "hypothesis": "hello word its a test"},
    {
        "id": 2,
        "reference": "今天天气很好，我们去公园散步吧！",
        "hypothesis": "今天天氣很好我們去公園散步",
        "language": "zh",
    },
    {"id": "en-3", "reference": "Don’t stop.", "hypothesis": "don't stop", "language": "en"},
]


def test_scores_every_line_like_the_server_and_exits_0(tmp_path: Path) -> None:
    path = tmp_path / "transcripts.jsonl"
    path.write_bytes(jsonl(*GOOD))
    proc = run("--normalizer", "seed-tts-eval", str(path))
    assert proc.returncode == 0, proc.stderr
    out = lines(proc.stdout)
    assert [o["id"] for o in out] == ["en-1", 2, "en-3"]
    for line, o in zip(GOOD, out, strict=True):
        server = score_transcript(
            line["reference"],
            line["hypothesis"],
            normalizer=get_normalizer("seed-tts-eval"),
            policy=RewardPolicy(),
            language=line.get("language"),
            duration_s=1.0,
            reference_duration_s=None,
        ).response().model_dump(exclude_none=True)
        assert (o["cer"], o["wer"]) == (server["cer"], server["wer"])
        assert o["normalized_reference"] == server["normalized_reference"]
        assert o["normalized_hypothesis"] == server["normalized_transcript"]
        assert o["normalizer"] == "seed-tts-eval"
    assert out[0]["wer"] == pytest.approx(2 / 5) and out[0]["normalized_hypothesis"] == "hello word its a test"
    assert out[1]["cer"] == pytest.approx(1 / 14) and out[1]["char_level"] is True
    assert out[2]["normalized_reference"] == "dont stop" and out[2]["wer"] == 0.5


def test_refused_lines_get_an_error_each_and_exit_1() -> None:
    data = (
        jsonl(GOOD[0])
        + b"\n"  # blank lines are skipped
        + b"{not json\n"
        + b'"a string"\n'
        + jsonl({"id": "missing", "reference": "hello"})
        + jsonl({"id": "typed", "reference": 5, "hypothesis": "x"})
        + jsonl({"id": "punct", "reference": "...", "hypothesis": "x"})
        + jsonl({"id": "blank", "reference": "  ", "hypothesis": "x"})
        + jsonl({"id": "fr", "reference": "bonjour", "hypothesis": "bonjour", "language": "fr"})
        + b'{"id": "bad-utf8", "reference": "caf\xe9", "hypothesis": "x"}\n'
        + jsonl({"id": 1.5, "reference": "a", "hypothesis": "a"})
        + jsonl(GOOD[1])
    )
    proc = run("--normalizer", "seed-tts-eval", "-", stdin=data)
    assert proc.returncode == 1, proc.stderr
    out = lines(proc.stdout)
    assert len(out) == 11
    assert out[0]["id"] == "en-1" and "cer" in out[0]
    assert out[-1]["id"] == 2 and out[-1]["cer"] == pytest.approx(1 / 14)
    refused = {(o["id"], o["line"]): o["error"]["code"] for o in out[1:-1]}
    assert refused == {
        (None, 3): "invalid_json",
        (None, 4): "invalid_line",
        ("missing", 5): "invalid_line",
        ("typed", 6): "invalid_line",
        ("punct", 7): "empty_reference",
        ("blank", 8): "empty_reference",
        ("fr", 9): "unsupported_language",
        (None, 10): "invalid_json",
        (None, 11): "invalid_line",
    }
    messages = {o["line"]: o["error"]["message"] for o in out[1:-1]}
    assert messages[5] == "hypothesis is missing"
    assert messages[6] == "reference must be a string, got int"
    assert messages[7].startswith("reference '...' has no words left after seed-tts-eval normalization")
    assert "not language 'fr'" in messages[9]


def test_language_option_applies_to_lines_without_one() -> None:
    data = jsonl(
        {"id": 1, "reference": "ABC", "hypothesis": "abc"},
        {"id": 2, "reference": "ABC", "hypothesis": "abc", "language": "en"},
    )
    out = lines(run("--normalizer", "seed-tts-eval", "--language", "zh", "-", stdin=data).stdout)
    # Chinese rules keep Latin case (3 substitutions); the line's own "en" lower-cases.
    assert (out[0]["cer"], out[0]["language"], out[0]["char_level"]) == (1.0, "zh", True)
    assert (out[1]["cer"], out[1]["language"]) == (0.0, "en")


def test_whisper_en_mode_runs_openais_normaliser() -> None:
    pytest.importorskip("whisper.normalizers", reason="openai-whisper is not installed")
    data = jsonl(
        {
            "id": 1,
            "reference": "Mr. Smith paid $20.5 million, 'cause colour.",
            "hypothesis": "mister smith paid twenty point five million dollars because color",
        }
    )
    proc = run("--normalizer", "whisper-en", "-", stdin=data)
    assert proc.returncode == 0, proc.stderr
    (o,) = lines(proc.stdout)
    # Numbers, titles and spelling are standardized; "'cause" stays "cause" (OpenAI has no
    # such rule), so one word of six differs.
    assert o["normalized_reference"] == "mister smith paid $20500000 cause color"
    assert o["normalized_hypothesis"] == "mister smith paid $20500000 because color"
    assert o["wer"] == pytest.approx(1 / 6)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--normalizer", "basic", "/nonexistent/transcripts.jsonl"], "cannot read /nonexistent/transcripts.jsonl"),
        (["--normalizer", "basic", "/"], "cannot read /: Is a directory"),
        (["--normalizer", "seed-tts-eval", "--language", "fr", "-"], "--language fr: the seed-tts-eval normalizer"),
        (["--normalizer", "nope", "-"], "invalid choice: 'nope'"),
    ],
)
def test_unreadable_input_or_bad_options_exit_2(args: list[str], message: str) -> None:
    proc = run(*args, stdin=b"")
    assert proc.returncode == 2
    assert message in proc.stderr.decode()
    assert proc.stdout == b""


def test_empty_input_exits_0_with_no_output() -> None:
    proc = run("--normalizer", "basic", "-", stdin=b"\n\n")
    assert (proc.returncode, proc.stdout) == (0, b"")


def test_without_normalizer_it_scores_as_the_server_does_by_default() -> None:
    from audio_reward.scorer_server.settings import ServerSettings

    default = ServerSettings.model_fields["normalizer"].default
    data = jsonl(*GOOD)
    implicit, explicit = run("-", stdin=data), run("--normalizer", default, "-", stdin=data)
    assert implicit.returncode == 0 and implicit.stdout == explicit.stdout
    assert {o["normalizer"] for o in lines(implicit.stdout)} == {"basic"}
