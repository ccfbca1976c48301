"""Overload, engine failures, start-up and shutdown, with injected engines.

The engines here are deliberately slow or failing so that each fault happens
on cue; the HTTP server, scheduler and scoring around them are the real ones.
"""

from __future__ import annotations

import concurrent.futures
import os
import re
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from typing import Any

import httpx
import numpy as np
import pytest

from audio_reward.protocol import encode_f32
from audio_reward.scorer_server.engines import (
    EngineConfig,
    EngineInfo,
    ThreadedEngine,
    Transcription,
    TranscriptionInput,
)
from audio_reward.scorer_server.engines.faster_whisper_engine import FasterWhisperEngine
from tests.testkit.server import (
    REPO_ROOT,
    free_port,
    inprocess_server,
    serve_command,
    server_process,
    stop_process,
    wait_ready,
)
from tests.testkit.speech import synth_speech, tone

TEXT = "The quick brown fox jumps over the lazy dog."
SECRET = "/secret/internal/path/model.bin"


def tone_body(seconds: float = 0.5, **extra: Any) -> dict[str, Any]:
    return {"protocol_version": "1", "waveform_f32_base64": encode_f32(tone(seconds)), "sample_rate": 16_000,
            "prompt": TEXT, **extra}


class GatedEngine(ThreadedEngine):
    """Answers the reference text, but only once ``release`` is set; counts its calls."""

    def __init__(self, *, load_gate: threading.Event | None = None, fail_load: bool = False) -> None:
        super().__init__(workers=1)
        self.info = EngineInfo("gated", "gated-test-engine")
        self.started = threading.Event()
        self.release = threading.Event()
        self.load_gate = load_gate
        self.fail_load = fail_load
        self.batches: list[int] = []

    def load(self) -> None:
        if self.fail_load:
            raise FileNotFoundError(f"weights missing at {SECRET}")
        if self.load_gate is not None:
            self.load_gate.wait(30)

    def warmup(self) -> None:
        """No warm-up: the gate would block it."""

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        self.batches.append(len(batch))
        self.started.set()
        self.release.wait(30)
        return [Transcription(TEXT) for _ in batch]


class FailOnLoudEngine(FasterWhisperEngine):
    """Real tiny.en, except that a batch holding a loud utterance (peak > 0.9) raises."""

    splits_batches = False  # the whole batch goes through the override below

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        if any(float(np.abs(item.audio).max()) > 0.9 for item in batch):
            raise RuntimeError(f"CUDA error: device-side assert at {SECRET}")
        return super().transcribe_batch_sync(batch)


class BrokenTextEngine(ThreadedEngine):
    """Returns a transcript that is not a string: scoring crashes inside the server."""

    def __init__(self) -> None:
        super().__init__(workers=1)
        self.info = EngineInfo("broken", "broken-test-engine")

    def load(self) -> None:
        pass

    def transcribe_batch_sync(self, batch: Sequence[TranscriptionInput]) -> list[Transcription]:
        return [Transcription(text=None) for _ in batch]  # type: ignore[arg-type]


def assert_error(r: httpx.Response, status: int, code: str, retryable: bool) -> dict[str, Any]:
    assert r.status_code == status, r.text
    error = r.json()["error"]
    assert error["code"] == code and error["retryable"] is retryable
    assert "Traceback" not in r.text and SECRET not in r.text
    return error


def test_full_queue_answers_429_with_retry_after() -> None:
    engine = GatedEngine()
    with inprocess_server(engine, max_queue=1, max_batch_size=1, max_wait_ms=0) as (url, _), \
            concurrent.futures.ThreadPoolExecutor(4) as pool:
        first = pool.submit(httpx.post, f"{url}/v1/score", json=tone_body(), timeout=60)
        assert engine.started.wait(10)  # the engine holds request 1; request 2 fills the queue
        second = pool.submit(httpx.post, f"{url}/v1/score", json=tone_body(), timeout=60)
        deadline = time.monotonic() + 10
        while "audio_reward_queue_depth 1.0" not in httpx.get(f"{url}/metrics").text:
            assert time.monotonic() < deadline
            time.sleep(0.02)
        third = httpx.post(f"{url}/score", json=tone_body(), timeout=60)
        batch = httpx.post(f"{url}/v1/score/batch", json={"protocol_version": "1", "items": [tone_body()]}, timeout=60)
        engine.release.set()
        assert first.result().status_code == 200 and second.result().status_code == 200
    for r in (third, batch):
        assert "queue is full" in assert_error(r, 429, "queue_full", True)["message"]
        assert int(r.headers["retry-after"]) >= 1


def test_engine_failure_fails_only_its_batch_and_leaks_nothing() -> None:
    audio, rate = synth_speech(TEXT)
    good = {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio), "sample_rate": rate, "prompt": TEXT}
    loud = dict(good, waveform_f32_base64=encode_f32(np.clip(audio * 50, -1, 1)))
    engine = FailOnLoudEngine(EngineConfig(model="tiny.en"))
    with inprocess_server(engine, max_batch_size=1) as (url, _):
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(httpx.post, f"{url}/v1/score", json=b, timeout=120) for b in (good, loud, good)]
            ok1, failed, ok2 = (f.result() for f in futures)
        error = assert_error(failed, 500, "engine_error", True)
        assert error["request_id"] == failed.headers["x-request-id"]
        assert ok1.json()["score"] >= 0.9 and ok2.json()["score"] >= 0.9
        # In a batch request the failing utterance becomes its item's error; the others still score.
        r = httpx.post(f"{url}/v1/score/batch", json={"protocol_version": "1", "items": [good, loud]}, timeout=120)
        results = r.json()["results"]
        assert results[0]["score"] >= 0.9
        assert results[1]["error"]["code"] == "engine_error" and SECRET not in r.text
        assert "audio_reward_engine_failures_total 2.0" in httpx.get(f"{url}/metrics").text


def test_unexpected_crash_is_a_clean_500() -> None:
    with inprocess_server(BrokenTextEngine()) as (url, _):
        r = httpx.post(f"{url}/v1/score", json=tone_body(), timeout=60)
        error = assert_error(r, 500, "internal_error", True)
        assert r.headers["x-request-id"] in error["message"]
        assert "TypeError" not in r.text and "File " not in r.text
        assert httpx.get(f"{url}/healthz").status_code == 200  # the server lives on


def test_not_ready_until_loaded() -> None:
    gate = threading.Event()
    engine = GatedEngine(load_gate=gate)
    engine.release.set()
    with inprocess_server(engine, ready=False) as (url, _):
        assert httpx.get(f"{url}/healthz").status_code == 200
        assert_error(httpx.get(f"{url}/readyz"), 503, "not_ready", True)
        r = httpx.post(f"{url}/v1/score", json=tone_body(), timeout=60)
        assert_error(r, 503, "not_ready", True)
        assert int(r.headers["retry-after"]) >= 1
        assert httpx.get(f"{url}/v1/info").json()["ready"] is False
        gate.set()
        wait_ready(url, 10)
        assert httpx.post(f"{url}/v1/score", json=tone_body(), timeout=60).status_code == 200


def test_failed_load_is_reported_on_readyz() -> None:
    with inprocess_server(GatedEngine(fail_load=True), ready=False) as (url, _):
        deadline = time.monotonic() + 10
        while (r := httpx.get(f"{url}/readyz")).json()["error"]["code"] == "not_ready":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert_error(r, 503, "load_failed", False)
        assert "FileNotFoundError" in r.json()["error"]["message"]


def test_graceful_shutdown_finishes_requests_in_flight() -> None:
    engine = GatedEngine()
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        with inprocess_server(engine, max_batch_size=1) as (url, _):
            pending = pool.submit(httpx.post, f"{url}/v1/score", json=tone_body(), timeout=60)
            assert engine.started.wait(10)
            threading.Timer(0.5, engine.release.set).start()
        # Leaving the block asked the server to stop while the request was in the engine.
        r = pending.result()
    assert r.status_code == 200 and r.json()["score"] == 1.0


def test_cli_server_is_unready_before_load_then_ready_and_stops_on_sigterm() -> None:
    with server_process(model="tiny.en", verbose=True) as server:
        first = None
        deadline = time.monotonic() + 60
        while first is None and time.monotonic() < deadline:
            try:
                first = httpx.get(f"{server.url}/readyz", timeout=2)
            except httpx.TransportError:
                time.sleep(0.02)
        assert first is not None and first.status_code == 503
        assert first.json()["error"]["code"] == "not_ready"
        wait_ready(server.url, 120, proc=server.proc, log_path=server.log_path)
        assert httpx.get(f"{server.url}/readyz").json()["model"] == "tiny.en"
        # SIGTERM is a clean stop: exit 0; SIGKILL (-9) would mean it hung.
        assert stop_process(server.proc) == 0
        out = server.log_path.read_text()
    # -v: one "name = value  (source)" line per setting, nested ones by their dotted name, then a line once ready.
    assert "audio-reward serve: model = tiny.en  (flag --model)\n" in out
    assert "audio-reward serve: reward.formula = 1-cer  (default)\n" in out
    assert re.search(r"^audio-reward serve: ready on http://\S+ after \d+ s$", out, re.MULTILINE), out


def test_cli_exits_nonzero_when_the_model_is_missing(tmp_path: Any) -> None:
    missing = tmp_path / "no-such-model"
    missing.mkdir()
    with server_process(model=str(missing)) as server:
        assert server.proc.wait(60) == 1
        assert "has no model.bin" in server.log_path.read_text()


@pytest.mark.parametrize("flags", [{"max_batch_size": 0}, {"reward_formula": "square"}, {"preset": "nope"}])
def test_cli_rejects_invalid_settings(flags: dict[str, Any]) -> None:
    with server_process(**flags) as server:
        assert server.proc.wait(60) == 2
        assert "invalid settings" in server.log_path.read_text()


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_foreground_serve_stops_cleanly_on_a_signal(sig: signal.Signals) -> None:
    # Ctrl-C (SIGINT) or a service manager's SIGTERM on the README's foreground `audio-reward serve` (tiny.en):
    # exit 0 and a short stderr, never uvicorn's re-raised KeyboardInterrupt traceback nor death by the signal.
    port = free_port()
    proc = subprocess.Popen(serve_command({"port": port}), cwd=REPO_ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)})
    try:
        wait_ready(f"http://127.0.0.1:{port}", 120, proc=proc)
        proc.send_signal(sig)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err
    lines = err.splitlines()
    assert len(lines) <= 3 and "Traceback" not in err, err
    assert lines[-1] == f"audio-reward serve: stopped on {sig.name}"
