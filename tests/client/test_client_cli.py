"""``audio-reward score`` and ``audio-reward eval`` against a real loopback server."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audio_reward.cli import main
from audio_reward.scorer_client.evaluate import load_rows, summarize
from fault_server import FaultServer, ItemError, Score, Seen, Batch, always_score


def write_manifest(root: Path, tone: np.ndarray, n: int) -> Path:
    (root / "wavs").mkdir()
    rows = []
    for i in range(n):
        sf.write(root / "wavs" / f"u{i}.wav", tone[: 1600 + 200 * i], 16000)
        rows.append({"audio": f"wavs/u{i}.wav", "text": f"utterance {i}", "id": f"u{i}"})
    rows.append({"audio": "wavs/missing.wav", "text": "gone", "id": "missing"})
    rows.append({"audio": "wavs/u0.wav", "text": "dup", "id": "u0"})
    rows.append({"text": "no audio"})
    manifest = root / "manifest.jsonl"
    manifest.write_text("\n".join(json.dumps(r) for r in rows) + "\nnot json\n")
    return manifest


def test_eval_writes_report_and_resumes(fault_server: FaultServer, tone: np.ndarray, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write_manifest(tmp_path, tone, 12)
    out = tmp_path / "report"
    # First run: u3 and u7 fail with a final item error.
    def policy(seen: Seen):  # noqa: ANN202
        return Batch([ItemError("engine_failed", retryable=False) if fault_server.received[rid] == 1
                      and rid in crashers else Score({"wer": 0.05}) for rid in seen.request_ids])

    crashers: set[str] = set()
    fault_server.policy = always_score
    base = ["eval", str(manifest), "--out", str(out), "--url", fault_server.url, "--no-progress", "--chunk-size", "4"]

    # Make two items fail on their first attempt by text: find their request ids as they arrive.
    def first_policy(seen: Seen):  # noqa: ANN202
        if fault_server.http_requests["batch"] == 1:
            crashers.update(seen.request_ids[1:3])
        return policy(seen)

    fault_server.policy = first_policy
    assert main(base) == 1
    rows = load_rows(out / "utterances.jsonl")
    failed = {uid for uid, r in rows.items() if r["status"] == "error"}
    assert len(failed) == 2 + 4  # two item errors, the missing file, the duplicate, the row without audio, bad JSON
    assert rows["missing"]["error"]["code"] == "audio_not_found"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scored"] == 10 and summary["failed"] == 6
    assert summary["cer_percent"] == 0.0 and summary["wer_percent"] == 5.0
    assert summary["score"]["histogram"] and sum(b["count"] for b in summary["score"]["histogram"]) == 10
    assert {f["reason"] for f in summary["failures"]} >= {"engine_failed", "audio_not_found", "bad_manifest_row"}
    for png in ("cer_histogram.png", "score_vs_duration.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "CER (mean of per-utterance, %)" in (out / "summary.md").read_text()
    assert "CER 0.00 %" in capsys.readouterr().out

    # Second run: only the two failed utterances are sent again, nothing is scored twice.
    scored_before = sum(fault_server.scored.values())
    fault_server.policy = always_score
    with open(out / "utterances.jsonl", "a") as f:
        f.write('{"id": "torn", "sta')  # an interrupted write
    assert main(base) == 1  # the manifest's bad rows still fail
    assert sum(fault_server.scored.values()) == scored_before + 2
    summary = json.loads((out / "summary.json").read_text())
    assert summary["scored"] == 12 and summary["failed"] == 4
    assert "torn" not in load_rows(out / "utterances.jsonl")


def test_summary_follows_seed_tts_eval() -> None:
    rows = [{"status": "ok", "score": s, "cer": c, "wer": w} for s, c, w in
            [(1.0, 0.0, 0.0), (0.5, 0.5, 1.0), (0.9, 0.1, 0.2), (0.0, 1.5, 2.0)]]
    summary = summarize(rows + [{"status": "error", "id": "x", "error": {"type": "T", "message": "m"}}])
    assert summary["cer_percent"] == pytest.approx(100 * (0 + 0.5 + 0.1 + 1.5) / 4)  # mean of per-utterance values
    assert summary["wer_percent"] == pytest.approx(100 * 3.2 / 4)
    assert summary["score"]["median"] == pytest.approx(0.7)
    assert summary["failures"] == [{"id": "x", "audio": None, "reason": "T", "message": "m"}]


def test_score_command(fault_server: FaultServer, tone: np.ndarray, tmp_path: Path,
                       capsys: pytest.CaptureFixture[str]) -> None:
    wav, flac = tmp_path / "a.wav", tmp_path / "b.flac"
    sf.write(wav, tone, 16000)
    sf.write(flac, np.stack([tone, tone], axis=1), 16000)
    (tmp_path / "bad.wav").write_bytes(b"nope")
    assert main(["score", "--url", fault_server.url, "--text", "hi", "--json", str(wav), str(flac)]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["file"] for r in rows] == [str(wav), str(flac)] and all("score" in r for r in rows)
    assert main(["score", "--url", fault_server.url, "--text", "hi", str(wav), str(tmp_path / "bad.wav")]) == 1
    out = capsys.readouterr().out
    assert "score" in out and "transcript" in out and "AudioFileError" in out


def test_commands_report_bad_settings(tmp_path: Path) -> None:
    env = {"PATH": "", "AUDIO_REWARD_URL": ""}
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", "eval", "m.jsonl", "--out", str(tmp_path)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "no scorer URL" in proc.stderr
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", "eval", str(tmp_path / "none.jsonl"),
                           "--out", str(tmp_path), "--url", "http://127.0.0.1:9"], capture_output=True, text=True, env=env)
    assert proc.returncode == 2 and "does not exist" in proc.stderr
