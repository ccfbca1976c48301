"""The vLLM engine on real vLLM (vllm-cpu), through a real ``audio-reward serve`` on loopback.

Runs in the vLLM environment (``scripts/envs/vllm_cpu.sh``); skipped where vLLM
is not installed.  The checkpoint is a random-weight Whisper with 32-wide
heads (``python -m tests.testkit.random_checkpoints whisper --out DIR``, or
``AUDIO_REWARD_VLLM_MODEL=DIR``): its transcripts are garbage, vLLM's
scheduling of it is real.  Every count of requests inside vLLM is read from
vLLM's own scheduler statistics (``audio_reward_engine_scheduler_requests``
on ``/metrics``, filled by a vLLM stat logger from each engine step's
``SchedulerStats``), never from the server's own admission bound.

One server serves the whole module (vLLM takes a minute to start here):
``max_num_seqs`` 64, ``max_queue`` 16, ``request_timeout_s`` 6.  A burst of
100 clips of 30 s (224 decoded tokens each; 64 of them take about 13 s here)
fills vLLM to exactly 64 (running or waiting in vLLM's scheduler), queues 16 and refuses the rest with 429.
How many of the 80 admitted finish inside the timeout depends on the machine
(here none, on CI's faster machine all 64 in vLLM and none of the 16 queued),
so the test asserts what holds on any of them: every admitted request is
answered by a score or a 504, vLLM is empty within seconds of the 504s, and
vLLM's count of requests run to their end does not move after the answers:
the timed-out ones were aborted inside vLLM.
"""

from __future__ import annotations

import asyncio
import io
import os
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import numpy as np
import pytest

pytest.importorskip("vllm", reason="needs vLLM: scripts/envs/vllm_cpu.sh builds its environment")

from audio_reward.protocol import encode_f32
from tests.testkit.probes import read_metrics
from tests.testkit.server import ServerHandle, running_server

MAX_NUM_SEQS = 64
MAX_QUEUE = 16
TIMEOUT_S = 6.0
SCHED = "audio_reward_engine_scheduler_requests"


@pytest.fixture(scope="module")
def vllm_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    given = os.environ.get("AUDIO_REWARD_VLLM_MODEL")
    if given:
        return Path(given)
    from audio_reward.scorer_server.engines.checkpoints import resolve_transformers_checkpoint
    from tests.testkit.random_checkpoints import build_random_whisper

    base = resolve_transformers_checkpoint("base").path  # the packaged multilingual tokenizer
    return build_random_whisper(tmp_path_factory.mktemp("whisper-vllm"), tokenizer_from=base)


@pytest.fixture(scope="module")
def server(vllm_checkpoint: Path) -> Iterator[ServerHandle]:
    env = {"AUDIO_REWARD_SERVER_ENGINE_OPTIONS": f"max_num_seqs={MAX_NUM_SEQS}"}
    with running_server(engine="vllm", model=str(vllm_checkpoint), device="cpu", max_queue=MAX_QUEUE,
                        request_timeout_s=TIMEOUT_S, dedup_cache_size=0, env=env, ready_timeout_s=420) as handle:
        yield handle


def scheduler(url: str) -> dict[str, float]:
    metrics = read_metrics(url)
    return {key[len(SCHED) + len('{state="'):-2]: value for key, value in metrics.items() if key.startswith(SCHED)}


def noise(seconds: float, seed: int = 0) -> np.ndarray:
    return (0.1 * np.random.default_rng(seed).standard_normal(int(16000 * seconds))).astype(np.float32)


def score_body(audio: np.ndarray, language: str | None = "en") -> dict[str, object]:
    body: dict[str, object] = {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio),
                               "sample_rate": 16000, "prompt": "the quick brown fox"}
    if language is not None:
        body["language"] = language
    return body


def test_ready_scores_v1_and_transcribes_through_the_openai_route(server: ServerHandle) -> None:
    import soundfile as sf

    assert httpx.get(f"{server.url}/readyz", timeout=10).status_code == 200
    info = httpx.get(f"{server.url}/v1/info", timeout=10).json()
    assert info["batching"]["scheduler"] == "engine" and info["batching"]["max_in_flight"] == MAX_NUM_SEQS
    r = httpx.post(f"{server.url}/v1/score", json=score_body(noise(2.0)), timeout=60)
    assert r.status_code == 200, r.text
    out = r.json()
    assert out["engine"] == "vllm" and out["language"] == "en" and out["transcript"]
    assert 0.0 <= out["score"] <= 1.0
    buf = io.BytesIO()
    sf.write(buf, noise(2.0), 16000, format="WAV")
    model = httpx.get(f"{server.url}/v1/models", timeout=10).json()["data"][0]["id"]
    r = httpx.post(f"{server.url}/v1/audio/transcriptions", files={"file": ("a.wav", buf.getvalue(), "audio/wav")},
                   data={"model": model, "language": "en"}, timeout=60)
    assert r.status_code == 200, r.text
    assert r.json()["text"] == out["transcript"]  # same audio, same greedy decode, same engine
    assert scheduler(server.url)["running"] == 0


def test_a_request_without_language_is_detected_on_the_multilingual_checkpoint(server: ServerHandle) -> None:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, noise(2.0, seed=3), 16000, format="WAV")
    model = httpx.get(f"{server.url}/v1/models", timeout=10).json()["data"][0]["id"]
    before = scheduler(server.url)["finished"]
    r = httpx.post(f"{server.url}/v1/audio/transcriptions", files={"file": ("a.wav", buf.getvalue(), "audio/wav")},
                   data={"model": model, "response_format": "verbose_json"}, timeout=60)
    assert r.status_code == 200, r.text
    detected = r.json()["language"]
    assert detected.isalpha() and 2 <= len(detected) <= 3, r.json()  # the code of one of the language tokens
    # One vLLM request did both (the language is its first decode step), not a detection request and a second one.
    assert scheduler(server.url)["finished"] - before == 1
    forced = httpx.post(f"{server.url}/v1/audio/transcriptions", files={"file": ("a.wav", buf.getvalue(), "audio/wav")},
                        data={"model": model, "language": detected}, timeout=60)
    assert forced.json()["text"] == r.json()["text"]  # the same decode as with that language given


async def test_sixteen_concurrent_requests_run_in_vllm_at_once(server: ServerHandle) -> None:
    bodies = [score_body(noise(3.0, seed=i)) for i in range(16)]
    async with httpx.AsyncClient(timeout=60, limits=httpx.Limits(max_connections=32)) as client:
        answers = await asyncio.gather(*(client.post(f"{server.url}/v1/score", json=b) for b in bodies))
    assert {a.status_code for a in answers} == {200}
    stats = await asyncio.to_thread(scheduler, server.url)
    assert stats["peak_running"] > 1, stats  # vLLM's scheduler ran several sequences in one step
    assert stats["running"] == 0 and stats["waiting"] == 0


async def test_admission_bound_429_and_504_abort_inside_vllm(server: ServerHandle) -> None:
    clip = score_body(noise(30.0, seed=7))
    sent = MAX_NUM_SEQS + MAX_QUEUE + 20
    finished_before = (await asyncio.to_thread(scheduler, server.url))["finished"]
    async with httpx.AsyncClient(timeout=120, limits=httpx.Limits(max_connections=sent + 8)) as client:
        t0 = time.monotonic()
        answers = await asyncio.gather(*(client.post(f"{server.url}/v1/score", json=clip) for _ in range(sent)))
        all_answered = time.monotonic() - t0
    codes = [a.status_code for a in answers]
    refused = [a for a in answers if a.status_code == 429]
    assert len(refused) == sent - MAX_NUM_SEQS - MAX_QUEUE, codes
    assert all(int(a.headers["Retry-After"]) >= 1 for a in refused)
    assert all(a.json()["error"]["code"] == "queue_full" for a in refused)
    timed_out = [a for a in answers if a.status_code == 504]
    finished = [a for a in answers if a.status_code == 200]
    # Every admitted request is answered, by a score or a 504.  The queued ones wait for a slot in vLLM and then
    # for their own decode: on every machine seen so far (CI's is about 2.5 times this one's speed) they time out.
    assert len(timed_out) + len(finished) == MAX_NUM_SEQS + MAX_QUEUE, codes
    assert len(timed_out) >= 1, codes
    assert all(a.json()["error"]["code"] == "timeout" for a in timed_out)
    assert all(0.0 <= a.json()["score"] <= 1.0 for a in finished)
    assert all_answered < TIMEOUT_S + 5
    # vLLM held exactly max_num_seqs requests (the server's bound), never more.  How many of them ran in one
    # step depends on how fast vLLM admits encoder work on this machine, so that count is only bounded.
    stats = await asyncio.to_thread(scheduler, server.url)
    answered_at = stats["finished"]
    assert answered_at - finished_before >= len(finished), stats
    assert stats["peak_held"] == MAX_NUM_SEQS, stats
    assert 1 < stats["peak_running"] <= MAX_NUM_SEQS, stats
    # Finishing 64 such clips takes about 13 s here (and the 16 queued ones as long again); aborted, vLLM is
    # empty within a few seconds of the 504s.
    deadline = time.monotonic() + 4.0
    while time.monotonic() < deadline:
        stats = await asyncio.to_thread(scheduler, server.url)
        if stats["running"] == 0 and stats["waiting"] == 0 and stats.get("unfinished", 0) == 0:
            break
        await asyncio.sleep(0.1)
    assert stats["running"] == 0 and stats["waiting"] == 0 and stats.get("unfinished", 0) == 0, stats
    # vLLM counts a request finished when it ran to its end, never when it was aborted: whatever was still in vLLM
    # when the 504s went out never finished.  (One whose last step and timeout fell in the same instant finished
    # before its 504 was sent, so it is counted in answered_at.)
    assert stats["finished"] == answered_at, (stats, answered_at, codes)
    # And it still serves.
    r = await asyncio.to_thread(httpx.post, f"{server.url}/v1/score", json=score_body(noise(1.0)), timeout=60)
    assert r.status_code == 200, r.text
