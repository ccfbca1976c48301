"""``audio-reward score`` and ``audio-reward eval`` against a real loopback server."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

from audio_reward.cli import main
from audio_reward.scorer_client import ClientSettings
from audio_reward.scorer_client.eval.evaluate import load_rows, run_eval, summarize, summary_markdown
from tests.testkit.fault_server import (
    Batch,
    FaultServer,
    Held,
    ItemError,
    Score,
    Seen,
    Status,
    always_score,
)


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
    # First run: the first two requests get a final item error; each utterance is its own request.
    crashers: set[str] = set()

    def first_policy(seen: Seen):
        if fault_server.http_requests["batch"] <= 2:
            crashers.update(seen.request_ids)
        return Batch([ItemError("engine_failed", retryable=False) if rid in crashers else Score({"wer": 0.05})
                      for rid in seen.request_ids])

    fault_server.policy = first_policy
    base = ["eval", str(manifest), "--out", str(out), "--url", fault_server.url, "--no-progress", "--chunk-size", "4"]
    assert main(base) == 1
    assert len(crashers) == 2 and fault_server.http_requests["batch"] == 12  # one request per utterance
    rows = load_rows(out / "utterances.jsonl")
    failed = {uid for uid, r in rows.items() if r["status"] == "error"}
    assert len(failed) == 2 + 4  # two item errors, the missing file, the duplicate, the row without audio, bad JSON
    assert rows["missing"]["error"]["code"] == "audio_not_found"
    summary = json.loads((out / "summary.json").read_text())
    assert summary["utterances"] == 16 and summary["scored"] == 10 and summary["failed"] == 6
    assert summary["cer_percent"] == 0.0 and summary["wer_percent"] == 5.0
    assert summary["score"]["histogram"] and sum(b["count"] for b in summary["score"]["histogram"]) == 10
    assert {f["reason"] for f in summary["failures"]} >= {"engine_failed", "audio_not_found", "bad_manifest_row"}
    for png in ("cer_histogram.png", "score_vs_duration.png", "cer_by_duration.png"):
        assert (out / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png in summary["plots"]
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
    assert summary["utterances"] == 16 and summary["scored"] == 12 and summary["failed"] == 4
    assert "torn" not in load_rows(out / "utterances.jsonl")
    # One line per id after a resume, in manifest order, as the summary counts them (not 16 + the retried rows).
    lines = [json.loads(line) for line in (out / "utterances.jsonl").read_text().splitlines()]
    assert [row["id"] for row in lines] == summary["ids"] and len(lines) == 16
    assert sum(row["status"] == "ok" for row in lines) == 12
    assert main(base) == 1  # a third run retries the bad rows only, and the file stays one line per id
    assert len((out / "utterances.jsonl").read_text().splitlines()) == 16


def test_eval_counts_every_item_once_on_the_bar_and_in_the_summary(fault_server: FaultServer, tone: np.ndarray,
                                                                   tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, tone, 5)
    seen_rows: list[dict] = []
    started: list[tuple[int, int]] = []
    settings = ClientSettings(fault_server.url, concurrency=2, chunk_size=1)
    summary = asyncio.run(run_eval(manifest, tmp_path / "out", settings, on_start=lambda *a: started.append(a),
                                   on_row=seen_rows.append, plots=False))
    assert started == [(9, 0)]  # 5 utterances, a missing file, a duplicate, a row without audio, bad JSON
    assert len(seen_rows) == summary["utterances"] == 9
    assert sum(r["status"] != "ok" for r in seen_rows) == summary["failed"] == 4
    # Rows reach the file as each item finishes: the file has every row the callback saw, in order.
    lines = (tmp_path / "out" / "utterances.jsonl").read_text().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [r["id"] for r in seen_rows]


def test_eval_progress_bar_shows_failures(fault_server: FaultServer, tone: np.ndarray, tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write_manifest(tmp_path, tone, 3)
    assert main(["eval", str(manifest), "--out", str(tmp_path / "out"), "--url", fault_server.url, "-v"]) == 1
    err = capsys.readouterr().err
    assert "7/7" in err and "failed=4" in err
    assert f"audio-reward eval: urls = {fault_server.url}" in err


def test_eval_reports_timeouts(fault_server: FaultServer, tone: np.ndarray, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write_manifest(tmp_path, tone, 3)
    fault_server.policy = lambda seen: Status(504, "timeout", retryable=True)
    out = tmp_path / "out"
    assert main(["eval", str(manifest), "--out", str(out), "--url", fault_server.url, "--no-progress",
                 "--max-retries", "0"]) == 1
    summary = json.loads((out / "summary.json").read_text())
    assert summary["timeouts"] == 3 and summary["failed"] == 3 + 4
    assert "(timeouts 3)" in capsys.readouterr().out
    assert "of which timeouts (504 or no answer in time) | 3" in (out / "summary.md").read_text()
    assert "(timeout)" in (out / "report.html").read_text()


def test_eval_refuses_to_resume_with_a_scorer_that_scores_differently(fault_server: FaultServer, tone: np.ndarray,
                                                                       tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    manifest = write_manifest(tmp_path, tone, 2)
    out = tmp_path / "out"
    base = ["eval", str(manifest), "--out", str(out), "--url", fault_server.url, "--no-progress"]
    assert main(base) == 1
    rows_before = (out / "utterances.jsonl").read_text()
    fault_server.info = {**fault_server.info, "normalizer": "whisper-english"}
    capsys.readouterr()
    assert main(base) == 2
    err = capsys.readouterr().err
    assert "scores differently" in err and 'normalizer: null != "whisper-english"' in err
    assert (out / "utterances.jsonl").read_text() == rows_before  # nothing lost, nothing added


def test_eval_fails_fast_without_its_extras(fault_server: FaultServer, tone: np.ndarray, tmp_path: Path) -> None:
    blocker = tmp_path / "blocked" / "matplotlib"
    blocker.mkdir(parents=True)
    (blocker / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    manifest = write_manifest(tmp_path, tone, 2)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(blocker.parent), *sys.path])}
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", "eval", str(manifest), "--out",
                           str(tmp_path / "out"), "--url", fault_server.url], capture_output=True, text=True, env=env)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "matplotlib" in proc.stderr and "pip install" in proc.stderr
    assert sum(fault_server.http_requests.values()) == 0 and not (tmp_path / "out").exists()


def test_eval_html_report_is_self_contained(fault_server: FaultServer, tone: np.ndarray, tmp_path: Path) -> None:
    manifest = write_manifest(tmp_path, tone, 3)
    out = tmp_path / "out"
    main(["eval", str(manifest), "--out", str(out), "--url", fault_server.url, "--no-progress"])
    page = (out / "report.html").read_text()
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    linked = [s[:40] for s in sources if not s.startswith("data:")]
    assert sources and not linked, linked
    assert sum(s.startswith("data:image/png;base64,") for s in sources) == 3
    assert sum(s.startswith("data:audio/wav;base64,") for s in sources) == 3  # the worst utterances' audio
    assert "<th>transcript</th>" in page and "audio_not_found" in page


def test_summary_follows_seed_tts_eval() -> None:
    rows = [
        {"status": "ok", "score": s, "cer": c, "wer": w}
        for s, c, w in [(1.0, 0.0, 0.0), (0.5, 0.5, 1.0), (0.9, 0.1, 0.2), (0.0, 1.5, 2.0)]
    ]
    summary = summarize([*rows, {"status": "error", "id": "x", "error": {"type": "T", "message": "m"}}])
    assert summary["cer_percent"] == pytest.approx(100 * (0 + 0.5 + 0.1 + 1.5) / 4)  # mean of per-utterance values
    assert summary["wer_percent"] == pytest.approx(100 * 3.2 / 4)
    assert summary["score"]["median"] == pytest.approx(0.7)
    assert summary["failures"] == [{"id": "x", "audio": None, "reason": "T", "message": "m"}]
    assert summary["signals"] == {}  # a server without speaker and quality models answers none


def test_summary_gives_the_mean_and_median_of_each_signal_beside_the_cer() -> None:
    rows = [{"status": "ok", "score": 1.0, "cer": 0.0, "wer": 0.0, "speaker_similarity": sim, "dnsmos_ovrl": mos}
            for sim, mos in [(0.2, 3.0), (0.6, 3.5), (0.7, 4.0)]]
    summary = summarize([*rows, {"status": "ok", "score": 1.0, "cer": 0.0, "wer": 0.0, "dnsmos_ovrl": 2.0}])
    assert summary["signals"]["speaker_similarity"] == {"mean": pytest.approx(0.5), "median": 0.6, "count": 3}
    assert summary["signals"]["dnsmos_ovrl"] == {"mean": pytest.approx(3.125), "median": 3.25, "count": 4}
    assert "| speaker_similarity mean / median | 0.5000 / 0.6000 |" in summary_markdown(summary)


def test_score_command(
    fault_server: FaultServer, tone: np.ndarray, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
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


def test_commands_default_to_a_local_scorer_and_print_their_settings_with_v(tmp_path: Path) -> None:
    env = {"PATH": "", "AUDIO_REWARD_URL": ""}
    proc = subprocess.run(
        [sys.executable, "-m", "audio_reward.cli", "eval", "m.jsonl", "--out", str(tmp_path), "-v"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 2 and "audio-reward eval: urls = http://127.0.0.1:8000" in proc.stderr
    assert "manifest m.jsonl does not exist" in proc.stderr
    quiet = subprocess.run(
        [sys.executable, "-m", "audio_reward.cli", "eval", "m.jsonl", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
    )
    # Without -v only what went wrong: one line, no settings.
    assert quiet.returncode == 2 and quiet.stderr.strip().splitlines() == [
        line for line in proc.stderr.strip().splitlines() if "manifest m.jsonl does not exist" in line
    ]
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "audio_reward.cli",
            "eval",
            str(tmp_path / "none.jsonl"),
            "--out",
            str(tmp_path),
            "--url",
            "http://127.0.0.1:9",
        ],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 2 and "does not exist" in proc.stderr
    proc = subprocess.run(
        [sys.executable, "-m", "audio_reward.cli", "score", "--text", "hi", "x.wav", "--url", "ftp://x"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 2 and "has an unsupported protocol 'ftp://'" in proc.stderr
    assert proc.stderr.count("\n") == 1 and "pydantic" not in proc.stderr and "validation error" not in proc.stderr


@pytest.mark.parametrize("command", ["score", "eval"])
def test_a_url_without_a_scheme_reaches_the_scorer(fault_server: FaultServer, tone: np.ndarray, tmp_path: Path,
                                                   command: str) -> None:
    hostport = fault_server.url.removeprefix("http://")
    sf.write(tmp_path / "a.wav", tone, 16000)
    args = (["score", "--text", "hi", str(tmp_path / "a.wav")] if command == "score" else
            ["eval", str(write_manifest(tmp_path, tone, 1)), "--out", str(tmp_path / "out"), "--no-progress"])
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", *args, "--url", hostport],
                          capture_output=True, text=True, timeout=120)
    assert "ValidationError" not in proc.stderr and "errors.pydantic.dev" not in proc.stderr, proc.stderr
    assert fault_server.http_requests["batch"] + fault_server.http_requests["single"] >= 1
    assert proc.returncode == (0 if command == "score" else 1), proc.stderr  # eval's manifest has bad rows


def test_score_names_what_is_wrong_with_a_file(
    fault_server: FaultServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "notes.wav").write_text("these are not samples")
    assert (
        main(
            [
                "score",
                "--url",
                fault_server.url,
                "--text",
                "hi",
                str(tmp_path / "missing.wav"),
                str(tmp_path / "notes.wav"),
                str(tmp_path),
            ]
        )
        == 1
    )
    out = capsys.readouterr().out
    assert f"{tmp_path / 'missing.wav'} does not exist" in out
    assert f"{tmp_path / 'notes.wav'} is not an audio file soundfile can read" in out
    assert f"{tmp_path} is not a file" in out
    assert "System error" not in out and "<_io." not in out and "LibsndfileError" not in out
    assert sum(fault_server.http_requests.values()) == 0


def test_eval_says_when_the_scorer_is_unreachable(
    tone: np.ndarray, tmp_path: Path, dead_url: str, fault_server: FaultServer
) -> None:
    manifest = write_manifest(tmp_path, tone, 1)
    out = tmp_path / "runs" / "out"
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", "eval", str(manifest), "--out", str(out),
                           "--url", dead_url, "--no-progress"], capture_output=True, text=True, timeout=120)
    # The exit status docs/client.md gives an unreachable scorer, one line saying so, and no folder left behind.
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    said = [line for line in proc.stderr.splitlines() if "cannot reach" in line]
    assert len(said) == 1 and said[0].startswith(f"audio-reward eval: cannot reach the scorer at {dead_url}: ")
    assert not out.exists() and not out.parent.exists()
    # A run already there keeps what it has when its scorer is unreachable on resume.
    assert main(["eval", str(manifest), "--out", str(out), "--url", fault_server.url, "--no-progress"]) == 1
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["eval", str(manifest), "--out", str(out), "--url", dead_url, "--no-progress"]) == 2
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_score_exit_status_follows_the_documented_table(fault_server: FaultServer, tone: np.ndarray, dead_url: str,
                                                         tmp_path: Path) -> None:
    # docs/client.md: 0 every file scored, 1 a file failed, 2 bad usage or a scorer that answered nothing.
    sf.write(tmp_path / "a.wav", tone, 16000)
    (tmp_path / "bad.wav").write_bytes(b"nope")

    def score(url: str, *files: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "audio_reward.cli", "score", "--text", "hi", "--url", url,
                               "--max-retries", "1", "--backoff", "0", *files],
                              capture_output=True, text=True, timeout=120)

    wav, bad = str(tmp_path / "a.wav"), str(tmp_path / "bad.wav")
    assert score(fault_server.url, wav).returncode == 0
    assert score(fault_server.url, wav, bad).returncode == 1
    down = score(dead_url, wav)
    assert down.returncode == 2, down.stderr
    assert down.stderr.splitlines()[-1].startswith(f"audio-reward score: cannot reach the scorer at {dead_url}: ")
    assert "Traceback" not in down.stderr
    assert score("ftp://nowhere", wav).returncode == 2


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "audio_reward.cli", *args], capture_output=True, text=True,
                          timeout=120)


def test_a_scorer_that_wants_an_api_key_is_named_so_not_unreachable(tone: np.ndarray, tmp_path: Path) -> None:
    from tests.testkit.server import running_server

    sf.write(tmp_path / "a.wav", tone, 16000)
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"audio": "a.wav", "text": "hi"}) + "\n")
    with running_server(instant=True, env={"AUDIO_REWARD_API_KEY": "the-key"}) as server:
        env_free = ["--url", server.url]
        runs = {
            "score needs": _cli("score", "--text", "hi", str(tmp_path / "a.wav"), *env_free),
            "eval needs": _cli("eval", str(manifest), "--out", str(tmp_path / "run"), "--no-progress", *env_free),
            "score refused": _cli("score", "--text", "hi", str(tmp_path / "a.wav"), "--api-key", "wrong", *env_free),
        }
        assert _cli("score", "--text", "hi", str(tmp_path / "a.wav"), "--api-key", "the-key", *env_free).returncode == 0
    for name, proc in runs.items():
        command, wanted = name.split()
        last = proc.stderr.splitlines()[-1]
        assert proc.returncode == 2, (name, proc.stderr)
        words = "needs an API key" if wanted == "needs" else "refused the API key"
        assert last.startswith(f"audio-reward {command}: the scorer at {server.url} {words} (HTTP 401"), last
        assert last.endswith("give it with --api-key or AUDIO_REWARD_CLIENT_API_KEY")
        assert "cannot reach" not in proc.stderr and "Traceback" not in proc.stderr


def test_a_scorer_answering_504_is_named_so_not_unreachable(fault_server: FaultServer, tone: np.ndarray,
                                                            tmp_path: Path) -> None:
    sf.write(tmp_path / "a.wav", tone, 16000)
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text(json.dumps({"audio": "a.wav", "text": "hi"}) + "\n")
    fault_server.policy = lambda seen: Status(504, code="gateway_timeout")
    score = _cli("score", "--text", "hi", str(tmp_path / "a.wav"), "--url", fault_server.url, "--max-retries", "1",
                 "--backoff", "0")
    assert score.returncode == 2
    assert score.stderr.splitlines()[-1].startswith(
        f"audio-reward score: the scorer at {fault_server.url} answered errors through every retry (")
    fault_server.info_status = Status(504, code="gateway_timeout")  # a proxy in front of a stuck scorer
    ev = _cli("eval", str(manifest), "--out", str(tmp_path / "run"), "--no-progress", "--url", fault_server.url)
    assert ev.returncode == 2
    assert ev.stderr.splitlines()[-1].startswith(
        f"audio-reward eval: the scorer at {fault_server.url} answered but could not serve the request; try again")
    assert "cannot reach" not in score.stderr + ev.stderr


def test_an_unreachable_plain_http_scorer_is_described_without_tls_words(tone: np.ndarray, tmp_path: Path,
                                                                         dead_url: str) -> None:
    sf.write(tmp_path / "a.wav", tone, 16000)
    proc = _cli("score", "--text", "hi", str(tmp_path / "a.wav"), "--url", dead_url, "--max-retries", "0")
    port = dead_url.rsplit(":", 1)[1]
    assert proc.returncode == 2
    assert f"cannot connect to 127.0.0.1:{port}: " in proc.stderr.splitlines()[-1]
    assert "ssl" not in proc.stderr


def test_score_into_a_closed_pipe_stops_quietly(fault_server: FaultServer, tone: np.ndarray, tmp_path: Path) -> None:
    # `audio-reward score ... | head -1`: the reader leaves before the output is written. The read end is
    # closed before the command starts, so every write meets a closed pipe (no race with the pipe's buffer).
    files = []
    for i in range(3):
        sf.write(tmp_path / f"a{i}.wav", tone, 16000)
        files.append(str(tmp_path / f"a{i}.wav"))
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", "score", "--text", "hi", "--url",
                               fault_server.url, *files], stdout=write_end, stderr=subprocess.PIPE, text=True,
                              timeout=120)
    finally:
        os.close(write_end)
    assert proc.stderr == "" and proc.returncode == 141, proc.stderr
    assert fault_server.http_requests["batch"] == 1  # it did score before writing


def test_score_and_eval_read_m4a_and_webm_as_the_server_does(scorer_url: str, tmp_path: Path) -> None:
    from tests.testkit.speech import ffmpeg_bytes, synth_speech

    text = "The quick brown fox jumps over the lazy dog."
    audio, rate = synth_speech(text)
    (tmp_path / "speech.m4a").write_bytes(ffmpeg_bytes(audio, rate, "ipod", "aac", 24_000))
    (tmp_path / "speech.webm").write_bytes(ffmpeg_bytes(audio, rate, "webm", "libopus", 48_000))
    files = [str(tmp_path / "speech.m4a"), str(tmp_path / "speech.webm")]
    score = _cli("score", "--text", text, "--json", "--url", scorer_url, *files)
    assert score.returncode == 0, score.stdout + score.stderr
    rows = [json.loads(line) for line in score.stdout.splitlines()]
    assert [r["file"] for r in rows] == files and all(r["cer"] < 0.05 for r in rows), rows
    manifest = tmp_path / "manifest.jsonl"
    manifest.write_text("".join(json.dumps({"audio": Path(f).name, "text": text}) + "\n" for f in files))
    ev = _cli("eval", str(manifest), "--out", str(tmp_path / "run"), "--no-progress", "--url", scorer_url)
    assert ev.returncode == 0, ev.stdout + ev.stderr
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["scored"] == 2 and summary["cer_percent"] < 5


def test_score_help_names_the_formats_it_reads() -> None:
    usage = _cli("score", "--help").stdout
    assert "WAV or FLAC files" not in usage
    assert all(name in usage for name in ("WAV", "FLAC", "MP3", "OGG", "M4A", "WebM"))


def test_without_pyav_an_m4a_file_says_how_to_get_it(fault_server: FaultServer, tmp_path: Path) -> None:
    # The client environment has no PyAV: the file is refused with the way to read it, and never sent.
    from tests.testkit.speech import ffmpeg_bytes, synth_speech

    (tmp_path / "speech.m4a").write_bytes(ffmpeg_bytes(*synth_speech("Hello world."), "ipod", "aac", 24_000))
    hidden = tmp_path / "hidden"
    hidden.mkdir()
    (hidden / "sitecustomize.py").write_text("import sys\nsys.modules['av'] = None\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(hidden), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "audio_reward.cli", "score", "--text", "Hello world.", "--url",
                           fault_server.url, str(tmp_path / "speech.m4a")], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 1
    assert "M4A, WebM and other FFmpeg formats need PyAV: pip install av" in done.stdout
    assert sum(fault_server.http_requests.values()) == 0


@pytest.mark.parametrize(("url", "says"), [
    ("http//127.0.0.1:8000", "did you mean http://127.0.0.1:8000?"),
    ("http://no-such-scorer.invalid:8000", "cannot reach the scorer at http://no-such-scorer.invalid:8000: the "
                                           "scorer host 'no-such-scorer.invalid'"),
])
@pytest.mark.parametrize("command", ["score", "eval"])
def test_a_mistyped_url_or_unknown_host_is_one_line_at_once(tmp_path: Path, tone: np.ndarray, url: str, says: str,
                                                            command: str) -> None:
    """Issue 40, finding 2: neither is retried (four attempts with backoff) as if the scorer were down."""
    sf.write(tmp_path / "a.wav", tone, 16000)
    args = (["score", "--text", "hi", str(tmp_path / "a.wav")] if command == "score" else
            ["eval", str(write_manifest(tmp_path, tone, 1)), "--out", str(tmp_path / "out"), "--no-progress"])
    proc = subprocess.run([sys.executable, "-m", "audio_reward.cli", *args, "--url", url, "--backoff", "2"],
                          capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and says in lines[0], proc.stderr


def test_ctrl_c_on_eval_says_what_is_kept_in_one_line_and_a_rerun_resumes(fault_server: FaultServer, tone: np.ndarray,
                                                                          tmp_path: Path) -> None:
    """Issue 40, finding 1: Ctrl-C printed a 50-line KeyboardInterrupt traceback through asyncio and aiohttp."""
    manifest = write_manifest(tmp_path, tone, 40)
    out = tmp_path / "out"
    # Two answers come at once, the rest only once the eval has exited: the Ctrl-C lands while the eval is
    # scoring, however slowly this machine runs the test.
    stopped = threading.Event()
    fault_server.policy = lambda seen: always_score(seen) if seen.number <= 2 else Held(stopped)
    args = [sys.executable, "-m", "audio_reward.cli", "eval", str(manifest), "--out", str(out), "--url",
            fault_server.url, "--no-progress", "--concurrency", "1", "--chunk-size", "1"]
    proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    rows = out / "utterances.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and sum(1 for r in load_rows(rows).values() if r["status"] == "ok") < 2:
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    try:
        _, err = proc.communicate(timeout=30)
    finally:
        stopped.set()
    kept = sum(1 for r in load_rows(rows).values() if r["status"] == "ok")
    assert proc.returncode == 130, err
    assert err.splitlines() == [f"audio-reward eval: interrupted; {kept} of 44 utterances scored are kept in {rows}; "
                                "run the same command again to resume (scored ones are skipped)"], err
    assert 2 <= kept < 40
    # The rerun scores only the rest.
    fault_server.policy = always_score
    before = dict(fault_server.received)
    assert main(args[3:]) == 1  # the manifest's bad rows fail
    again = [rid for rid, n in fault_server.received.items() if n > before.get(rid, 0)]
    assert len(again) == 40 - kept
