"""ASR engine throughput in audio seconds per second, engines side by side on one device.

Steps, so the measuring machine needs no network and installs nothing:

``prepare --assets DIR`` (a machine with the project's dev extras): writes
``speech.npz`` (real hibari-tts English speech at 16 kHz) and ``whisper-tokenizer/``
(the processor files of the packaged Whisper base, converted) into DIR.

``build --assets DIR --arch A --size S`` writes the random-weight checkpoint
(Whisper large-v3 or Qwen3-ASR-0.6B shapes from config classes, ``never_stop``:
every clip decodes exactly its token cap, so throughput is comparable) and,
for Whisper when ``ct2-transformers-converter`` is installed, its CTranslate2
conversion for faster-whisper.  ``run`` builds it on first use too.

``run --assets DIR --engine NAME`` (the measuring machine): transcribes every
utterance ``--repeats`` times in-process and prints one JSON line: the median
wall time and audio seconds per second (the engine's in-process limit).
Engines: ``faster-whisper``, ``transformers``, ``vllm`` (our VLLMEngine, all
utterances in flight at once).  ``--via server`` measures the same engine
through ``audio-reward serve`` over loopback (every utterance one request,
``--concurrency`` in flight), and ``--engine vllm-serve`` vLLM's own
``vllm serve`` + ``/v1/audio/transcriptions`` (same concurrency, same decode
cap).  ``table FILE...`` prints the rows with each server row against its
engine's in-process limit and each row against ``vllm-serve``.

    python -m bench.engine_throughput prepare --assets /tmp/assets
    python -m bench.engine_throughput run --assets /tmp/assets --engine transformers --device cpu --size tiny
    python -m bench.engine_throughput run --assets /tmp/assets --engine transformers --device cpu --size tiny \
        --via server
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from tests.testkit.server import free_port

REPO = Path(__file__).resolve().parents[1]

SENTENCES = (
    "The quick brown fox jumps over the lazy dog.",
    "Reinforcement learning rewards speech that matches the prompt.",
    "She sells sea shells by the sea shore.",
    "Seven purple elephants were painting the kitchen on a rainy Tuesday.",
    "A policy that mumbles gets a low reward and learns to speak clearly.",
    "Please call Stella and ask her to bring these things with her from the store.",
    "The museum opens at nine and closes at five on weekdays.",
    "Numbers like twenty three and four hundred are spelled out in the prompt.",
)


def _stop_group(proc: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM the server's whole process group (it was started in a new session), SIGKILL after ``grace_s``."""
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)


def prepare(assets: Path) -> None:

    from audio_reward.scorer_server.engines.checkpoints import (
        resolve_transformers_checkpoint,
    )
    from tests.testkit.speech import speech_16k

    assets.mkdir(parents=True, exist_ok=True)
    clips = [speech_16k(text) for text in SENTENCES]
    np.savez(assets / "speech.npz", *clips)
    base = Path(resolve_transformers_checkpoint("base").path)
    tok = assets / "whisper-tokenizer"
    tok.mkdir(exist_ok=True)
    for name in ("tokenizer.json", "tokenizer_config.json", "processor_config.json", "generation_config.json",
                 "config.json"):
        shutil.copyfile(base / name, tok / name)
    print(f"assets in {assets}: {len(clips)} utterances, {sum(len(c) for c in clips) / 16000:.1f} s")


def load_speech(assets: Path, count: int) -> list[np.ndarray]:
    with np.load(assets / "speech.npz") as data:
        clips = [data[k] for k in sorted(data.files, key=lambda k: int(k.split("_")[1]))]
    return [clips[i % len(clips)] for i in range(count)]


def build_model(args: argparse.Namespace, work: Path) -> tuple[str, str]:
    """(transformers checkpoint path, description)."""
    if args.model:
        return args.model, args.model
    from tests.testkit.random_checkpoints import (
        build_random_qwen3_asr,
        build_random_whisper,
    )

    target = work / f"random-{args.arch}-{args.size}"
    if not (target / "config.json").exists():
        device = args.device if args.device.startswith("cuda") else None
        if args.arch == "qwen3_asr":
            build_random_qwen3_asr(target, size=args.size, never_stop=True, device=device)
        else:
            build_random_whisper(target, size=args.size, tokenizer_from=args.assets / "whisper-tokenizer",
                                 never_stop=True, device=device)
    shape = {"whisper": "whisper-large-v3", "qwen3_asr": "qwen3-asr-0.6b"}[args.arch] if args.size == "full" \
        else f"tiny {args.arch}"
    return str(target), f"random {shape}"


def ct2_quantization(device: str) -> str:
    return "float16" if device.startswith("cuda") else "float32"


def ct2_folder(hf_path: str, work: Path, quantization: str) -> str:
    from transformers import WhisperFeatureExtractor

    target = work / (Path(hf_path).name + f"-ct2-{quantization}")
    if not (target / "model.bin").exists():
        name = "ct2-transformers-converter"
        converter = shutil.which(name) or str(Path(sys.executable).parent / name)
        subprocess.run(
            [converter, "--model", hf_path, "--output_dir", str(target), "--quantization", quantization,
             "--copy_files", "tokenizer.json", "--force"],
            check=True, timeout=1800,
        )
        # faster-whisper reads the Mel size (80 or 128) from here.
        WhisperFeatureExtractor.from_pretrained(hf_path).to_json_file(str(target / "preprocessor_config.json"))
    return str(target)


def measure(run_once: Any, repeats: int) -> list[float]:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        run_once()
        times.append(time.perf_counter() - t0)
    return times


def engine_options(args: argparse.Namespace) -> dict[str, Any]:
    return {"max_num_seqs": args.concurrency} if args.engine == "vllm" else {}


def engine_times(
    args: argparse.Namespace, model: str, clips: list[np.ndarray], work: Path
) -> tuple[list[float], float]:
    """Wall times of the repeats and the mean decoded tokens per clip."""
    from audio_reward.scorer_server.engines import (
        EngineConfig,
        TranscriptionInput,
        create_engine,
    )

    items = [TranscriptionInput(c, "en") for c in clips]
    if args.engine == "faster-whisper":
        model = ct2_folder(model, work, ct2_quantization(args.device))
    config = EngineConfig(model=model, device=args.device, max_batch_size=args.batch, options=engine_options(args))
    engine = create_engine(args.engine, config)
    engine.load()
    tokens: list[int] = []
    try:
        if args.engine == "vllm":
            async def go() -> list[float]:
                await engine.transcribe(items[: args.batch])  # warm-up on the engine's own loop
                out = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    results = await engine.transcribe(items)  # everything in flight: vLLM batches continuously
                    out.append(time.perf_counter() - t0)
                    tokens[:] = [r.num_tokens or 0 for r in results]
                return out

            return asyncio.run(go()), statistics.fmean(tokens)
        engine.warmup()
        engine.transcribe_batch_sync(items[: args.batch])  # type: ignore[attr-defined]  # a full batch: new shapes

        def once() -> None:
            tokens.clear()
            for start in range(0, len(items), args.batch):
                results = engine.transcribe_batch_sync(items[start : start + args.batch])  # type: ignore[attr-defined]
                tokens.extend(r.num_tokens or 0 for r in results)

        return measure(once, args.repeats), statistics.fmean(tokens)
    finally:
        engine.close()


def scorer_server_times(args: argparse.Namespace, model: str, clips: list[np.ndarray], work: Path) -> list[float]:
    """The same engine behind ``audio-reward serve`` on loopback: one request per clip, ``--concurrency`` in flight."""
    import aiohttp
    import orjson

    from audio_reward.protocol import encode_f32
    from tests.testkit.server import wait_ready

    if args.engine == "faster-whisper":
        model = ct2_folder(model, work, ct2_quantization(args.device))
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "audio_reward.cli", "serve", "--engine", args.engine, "--model", model,
           "--device", args.device, "--port", str(port), "--max-batch-size", str(args.batch), "--max-wait-ms", "5",
           "--max-queue", str(max(4 * len(clips), 1024)), "--max-audio-seconds", "120", "--language", "en",
           "--dedup-cache-size", "0", "--request-timeout-s", "1800"]
    for key, value in engine_options(args).items():
        cmd += ["--engine-option", f"{key}={value}"]
    log_path = work / f"server-{args.engine}-{args.arch}.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            wait_ready(url, args.server_start_timeout, proc=proc, log_path=log_path)
            bodies = [orjson.dumps({"protocol_version": "1", "waveform_f32_base64": encode_f32(c), "sample_rate": 16000,
                                    "prompt": "x"}) for c in clips]

            async def go() -> list[float]:
                connector = aiohttp.TCPConnector(limit=args.concurrency)
                timeout = aiohttp.ClientTimeout(total=1800)
                async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
                    slots = asyncio.Semaphore(args.concurrency)

                    async def one(body: bytes) -> None:
                        async with slots, session.post(f"{url}/v1/score", data=body,
                                                       headers={"Content-Type": "application/json"}) as resp:
                            await resp.read()
                            if resp.status != 200:
                                raise RuntimeError(f"server answered {resp.status}: {(await resp.text())[:200]}")

                    await asyncio.gather(*(one(b) for b in bodies[: args.batch]))  # warm-up
                    out = []
                    for _ in range(args.repeats):
                        t0 = time.perf_counter()
                        await asyncio.gather(*(one(b) for b in bodies))
                        out.append(time.perf_counter() - t0)
                    return out

            return asyncio.run(go())
        finally:
            _stop_group(proc, 60)


def vllm_serve_times(args: argparse.Namespace, model: str, clips: list[np.ndarray]) -> list[float]:
    """vLLM's own transcription server on the same model, same concurrency and decode caps."""
    import httpx
    import soundfile as sf

    from audio_reward.scorer_server.engines import max_new_tokens_for

    port = free_port()
    cmd = ["vllm", "serve", model, "--port", str(port), "--host", "127.0.0.1", "--max-num-seqs",
           str(args.concurrency), "--seed", "0"]
    if args.arch == "whisper":
        cmd += ["--max-model-len", "448", "--dtype", "float16"]
    with open(args.work / "vllm-serve.log", "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        try:
            deadline = time.monotonic() + args.server_start_timeout
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"vllm serve exited with {proc.returncode}; see {args.work / 'vllm-serve.log'}")
                try:
                    if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    raise TimeoutError("vllm serve did not become healthy in time")
                time.sleep(1)
            wavs = []
            for clip in clips:
                buf = io.BytesIO()
                sf.write(buf, clip, 16000, format="WAV", subtype="FLOAT")
                wavs.append((buf.getvalue(), max_new_tokens_for(len(clip) / 16000)))

            async def go() -> list[float]:
                limits = httpx.Limits(max_connections=args.concurrency)
                slots = asyncio.Semaphore(args.concurrency)
                async with httpx.AsyncClient(timeout=600, limits=limits) as client:
                    async def one(wav: bytes, cap: int) -> None:
                        async with slots:
                            await post(wav, cap)

                    async def post(wav: bytes, cap: int) -> None:
                        r = await client.post(
                            f"http://127.0.0.1:{port}/v1/audio/transcriptions",
                            files={"file": ("a.wav", wav, "audio/wav")},
                            data={"model": model, "language": "en", "temperature": "0",
                                  "max_completion_tokens": str(cap), "response_format": "json"},
                        )
                        r.raise_for_status()

                    await asyncio.gather(*(one(w, c) for w, c in wavs[: args.batch]))
                    out = []
                    for _ in range(args.repeats):
                        t0 = time.perf_counter()
                        await asyncio.gather(*(one(w, c) for w, c in wavs))
                        out.append(time.perf_counter() - t0)
                    return out

            return asyncio.run(go())
        finally:
            _stop_group(proc, 30)


def build(args: argparse.Namespace) -> None:
    args.work.mkdir(parents=True, exist_ok=True)
    model, description = build_model(args, args.work)
    print(f"{description}: {model}", flush=True)
    if args.arch == "whisper" and shutil.which("ct2-transformers-converter"):
        print(f"CTranslate2: {ct2_folder(model, args.work, ct2_quantization(args.device))}", flush=True)


def run(args: argparse.Namespace) -> None:
    args.work.mkdir(parents=True, exist_ok=True)
    clips = load_speech(args.assets, args.utterances)
    audio_s = sum(len(c) for c in clips) / 16000
    via = "vllm serve" if args.engine == "vllm-serve" else args.via
    row: dict[str, Any] = {"engine": args.engine, "arch": args.arch, "device": args.device, "via": via,
                           "utterances": len(clips), "audio_s": round(audio_s, 1), "batch": args.batch,
                           "concurrency": args.concurrency}
    try:
        model, row["model"] = build_model(args, args.work)
        if args.engine == "vllm-serve":
            times = vllm_serve_times(args, model, clips)
        elif args.via == "server":
            times = scorer_server_times(args, model, clips, args.work)
        else:
            times, row["tokens_per_clip"] = engine_times(args, model, clips, args.work)
        wall = statistics.median(times)
        row.update(wall_s=round(wall, 3), audio_s_per_s=round(audio_s / wall, 2), runs=len(times))
    except Exception as exc:  # noqa: BLE001 - a bench row reports why it has no number
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
    print(json.dumps(row), flush=True)


def table(paths: list[Path]) -> None:
    rows = []
    for path in paths:
        for line in path.read_text().splitlines():
            if line.startswith("{"):
                rows.append(json.loads(line))
    ref = {(r["arch"], r["device"]): r["audio_s_per_s"] for r in rows
           if r["engine"] == "vllm-serve" and "audio_s_per_s" in r}
    limit = {(r["engine"], r["arch"], r["device"]): r["audio_s_per_s"] for r in rows
             if r.get("via", "in-process") == "in-process" and "audio_s_per_s" in r}
    print(f"{'engine':15} {'via':10} {'arch':9} {'model':24} {'device':6} {'utt':>4} {'audio s':>8} {'wall s':>7} "
          f"{'tok/clip':>8} {'audio s/s':>10} {'vs limit':>9} {'vs vllm serve':>14}")
    for r in rows:
        base = ref.get((r["arch"], r["device"]))
        speed = r.get("audio_s_per_s")
        own = limit.get(("vllm" if r["engine"] == "vllm-serve" else r["engine"], r["arch"], r["device"]))
        ratio = f"{speed / base:.2f}x" if speed and base else "-"
        vs_limit = f"{speed / own:.2f}x" if speed and own else "-"
        tokens = f"{r['tokens_per_clip']:.1f}" if "tokens_per_clip" in r else "-"
        print(f"{r['engine']:15} {r.get('via', 'in-process'):10} {r['arch']:9} "
              f"{Path(str(r.get('model', '?'))).name[:24]:24} {r['device']:6} {r['utterances']:>4} {r['audio_s']:>8} "
              f"{r.get('wall_s', '-')!s:>7} {tokens:>8} {speed or '-'!s:>10} {vs_limit:>9} {ratio:>14}"
              + (f"  ({r['error']})" if "error" in r else ""))
    print("vs limit: a server row against the same engine in-process (vllm serve against our vLLM engine in-process).")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--assets", type=Path, required=True)
    b = sub.add_parser("build")
    r = sub.add_parser("run")
    for q in (b, r):
        q.add_argument("--assets", type=Path, required=True)
        q.add_argument("--arch", default="whisper", choices=["whisper", "qwen3_asr"])
        q.add_argument("--size", default="full", choices=["tiny", "full"])
        q.add_argument("--model", default=None, help="a real transformers checkpoint folder (else random weights)")
        q.add_argument("--device", default="cuda")
        q.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "audio-reward-bench")
    r.add_argument("--engine", required=True, choices=["faster-whisper", "transformers", "vllm", "vllm-serve"])
    r.add_argument("--via", default="in-process", choices=["in-process", "server"],
                   help="call the engine in-process (its limit) or through audio-reward serve over loopback")
    r.add_argument("--utterances", type=int, default=256)
    r.add_argument("--batch", type=int, default=32, help="engine batch (faster-whisper, transformers)")
    r.add_argument("--concurrency", type=int, default=256, help="requests in flight (servers; vLLM's max_num_seqs)")
    r.add_argument("--repeats", type=int, default=3)
    r.add_argument("--server-start-timeout", type=float, default=420)
    t = sub.add_parser("table")
    t.add_argument("files", type=Path, nargs="+")
    args = parser.parse_args()
    if args.cmd == "prepare":
        prepare(args.assets)
    elif args.cmd == "build":
        build(args)
    elif args.cmd == "run":
        run(args)
    else:
        table(args.files)
    return 0


if __name__ == "__main__":
    sys.exit(main())
