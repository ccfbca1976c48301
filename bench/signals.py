"""What speaker similarity and DNSMOS add to a score request, against CER-only scoring, in one run.

    python -m bench.signals [--requests 64] [--rounds 1] [--json FILE]

Four real ``audio-reward serve`` processes (tiny.en on the CPU), one after the other, on the same clips
(hibari speech, 2.5–4.4 s), each sent twice over: as hibari makes them, and cut to whole Qwen3-TTS codec
frames (1920 samples at 24 kHz, 80 ms), the lengths the Qwen3-TTS policy produces. DNSMOS costs less on the
second (its convolutions run over one copy of a short clip, audio_reward/scorer_server/signals/p835.py).

- ``cer``: no signal model (what every server did before);
- ``speaker``: ``--speaker-model resemblyzer``, every request naming a registered reference and weighing
  its similarity (``speaker_weight`` 0.3);
- ``speaker, dnsmos on``: the same requests on a server that also has ``--quality-model dnsmos`` (they do
  not ask for DNSMOS, so it must not run);
- ``speaker+quality``: that server, every request weighing both terms (``quality_weight`` 0.2 as well).

Each is driven at concurrency 1 (``--requests`` / 8 requests, one at a time: the latency one request
pays) and at concurrency 32 (``--requests`` requests, 32 in flight: the time per request under load,
wall time / requests; and the server process's CPU time per request, which the other tenants of a shared
machine disturb less).  Printed, per kind of clip: the medians over ``--rounds`` and each mode's ratio to
``cer`` on the same clips.

Target (docs/signals.md): at concurrency 32 on the CPU the speaker and quality terms together add at
most 30 % to the time per request (``speaker+quality`` / ``cer`` <= 1.3).

First, in this process, what each of DNSMOS's shared paths (audio_reward/scorer_server/signals/p835.py,
p808.py) earns on the same clips: each model whole on every window (``quality_windows whole``, as
speechmos runs it) against the P.835 convolutions shared across the windows, then also over one period of
a repeating clip (the server's path), and the P.808 model whole per window against its grouped windows;
milliseconds a clip (median of ``--rounds`` + 2 passes) and each path's speed-up over the one before.
``--sharing-only`` stops there.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from audio_reward.protocol import encode_f32, encode_file
from audio_reward.scorer_server.signals.p808 import SharedWindowP808
from audio_reward.scorer_server.signals.p835 import WINDOW_SAMPLES, SharedWindowP835, repeat_period
from audio_reward.scorer_server.signals.quality import P808_HOP, DnsmosScorer
from audio_reward.scorer_server.signals.windows import WholeModel
from tests.testkit.server import running_server
from tests.testkit.speech import SENTENCES, espeak_speech, speech_16k, synth_speech

BOTH = {"speaker_model": "resemblyzer", "quality_model": "dnsmos"}
MODES: dict[str, dict[str, Any]] = {
    "cer": {},
    "speaker": {"speaker_model": "resemblyzer"},
    "speaker, dnsmos on": BOTH,
    "speaker+quality": BOTH,
}
REWARDS: dict[str, dict[str, float]] = {
    "cer": {},
    "speaker": {"speaker_weight": 0.3},
    "speaker, dnsmos on": {"speaker_weight": 0.3},
    "speaker+quality": {"speaker_weight": 0.3, "quality_weight": 0.2},
}
"""What each mode's requests weigh: a signal is measured for a request that weighs it (or asks for it)."""
TARGET_C32 = 1.3
CODEC_FRAME = 1920
"""Samples of one Qwen3-TTS codec frame at its 24 kHz (its tokenizer's decode upsample rate)."""
CLIPS = {"as synthesised": 1, "Qwen3-TTS lengths": CODEC_FRAME}
"""Each kind of clip: the length its samples are cut down to a multiple of."""


def _bodies(reference_id: str | None, reward: dict[str, float], multiple: int) -> list[dict[str, Any]]:
    out = []
    for text in SENTENCES:
        audio, rate = synth_speech(text)
        audio = audio[:len(audio) // multiple * multiple]
        body: dict[str, Any] = {"protocol_version": "1", "waveform_f32_base64": encode_f32(audio),
                                "sample_rate": rate, "prompt": text}
        if reference_id is not None:
            body["speaker_reference_id"] = reference_id
        if reward:
            body["reward"] = reward
        out.append(body)
    return out


def _cpu_seconds(pid: int) -> float:
    """User and system CPU time of process ``pid`` and its threads so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _drive(url: str, bodies: list[dict[str, Any]], requests: int, concurrency: int,
                 pid: int) -> dict[str, float]:
    latencies: list[float] = []
    gate = asyncio.Semaphore(concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=900,
                                 limits=httpx.Limits(max_connections=concurrency)) as client:

        async def one(i: int) -> None:
            async with gate:
                started = time.perf_counter()
                answer = await client.post("/v1/score", json=bodies[i % len(bodies)])
                latencies.append(time.perf_counter() - started)
                if answer.status_code != 200:
                    raise RuntimeError(f"request {i}: {answer.status_code} {answer.text[:200]}")

        started, cpu = time.perf_counter(), _cpu_seconds(pid)
        await asyncio.gather(*(one(i) for i in range(requests)))
        wall, cpu = time.perf_counter() - started, _cpu_seconds(pid) - cpu
    return {"per_request_s": wall / requests, "p50_s": statistics.median(latencies), "cpu_s": cpu / requests}


def _run_mode(mode: str, requests: int) -> dict[str, dict[str, dict[str, float]]]:
    # The request limit is raised: at c=32 a slow mode queues for minutes, and the point is its cost, not a 504.
    with running_server(model="tiny.en", max_wait_ms=5, request_timeout_s=900, **MODES[mode]) as server:
        reference_id = None
        if "speaker_model" in MODES[mode]:
            voice, rate = espeak_speech(SENTENCES[0], "en-us+f4")
            answer = httpx.post(f"{server.url}/v1/speakers", json={
                "protocol_version": "1", "audio_file_base64": encode_file(voice, rate)}, timeout=60)
            answer.raise_for_status()
            reference_id = answer.json()["speaker_reference_id"]
        out = {}
        for clips, multiple in CLIPS.items():
            bodies = _bodies(reference_id, REWARDS[mode], multiple)
            pid = server.proc.pid
            asyncio.run(_drive(server.url, bodies, 4, 4, pid))  # warm the connection pool and every path once
            out[clips] = {"c1": asyncio.run(_drive(server.url, bodies, max(4, requests // 8), 1, pid)),
                          "c32": asyncio.run(_drive(server.url, bodies, requests, 32, pid))}
        return out


def _dnsmos_paths(shared: DnsmosScorer, whole: DnsmosScorer) -> dict[str, Callable[[np.ndarray], object]]:
    """Each DNSMOS path, pairs of the whole model per window and its shared form, as a callable on a clip."""
    p835, p808 = shared._p835, shared._p808
    p835_whole, p808_whole = whole._p835, whole._p808
    assert isinstance(p835, SharedWindowP835) and isinstance(p808, SharedWindowP808)
    assert isinstance(p835_whole, WholeModel) and isinstance(p808_whole, WholeModel)
    calls = shared.max_windows_per_call

    def windows(audio: np.ndarray) -> tuple[np.ndarray, list[int], int | None]:
        clip, starts = shared._clip(audio)
        return clip, starts, repeat_period(len(audio), len(clip) // len(audio))

    def p808_inputs(audio: np.ndarray) -> tuple[list[np.ndarray], list[float], list[int]]:
        clip, starts, _ = windows(audio)
        features, references = shared._p808_inputs(clip, starts)
        return [f.astype(np.float32) for f in features], references, [s // P808_HOP for s in starts]

    def p835_whole_windows(clip: np.ndarray, starts: list[int], _: int | None) -> object:
        return p835_whole.window_scores([clip[s:s + WINDOW_SAMPLES] for s in starts], calls)

    def p835_period(clip: np.ndarray, starts: list[int], period: int | None) -> object:
        return p835.window_scores(clip, starts, calls, period)

    return {
        "P.835 whole per window": lambda a: p835_whole_windows(*windows(a)),
        "P.835 shared": lambda a: p835.window_scores(*windows(a)[:2], calls, None),
        "P.835 shared, one period": lambda a: p835_period(*windows(a)),
        "P.808 whole per window": lambda a: p808_whole.window_scores(p808_inputs(a)[0], calls),
        "P.808 grouped": lambda a: p808.window_scores(*p808_inputs(a), calls),
    }


def dnsmos_sharing(rounds: int) -> dict[str, dict[str, float]]:
    """Milliseconds a clip of each DNSMOS path on the bench's sentences (both kinds of clip), printed with each
    shared path's speed-up over the path above it."""
    shared, whole = DnsmosScorer(windows="shared"), DnsmosScorer(windows="whole")
    shared.load()
    whole.load()
    paths = _dnsmos_paths(shared, whole)
    out: dict[str, dict[str, float]] = {}
    for kind, multiple in CLIPS.items():
        frame = multiple * 16_000 // 24_000 or 1  # a codec frame at the 16 kHz DNSMOS takes
        clips = [audio[:len(audio) // frame * frame] for audio in (speech_16k(text) for text in SENTENCES)]
        times: dict[str, list[float]] = {name: [] for name in paths}
        for _ in range(rounds + 2):
            for name, path in paths.items():
                started = time.perf_counter()
                for clip in clips:
                    path(clip)
                times[name].append((time.perf_counter() - started) * 1000 / len(clips))
        out[kind] = row = {name: statistics.median(values) for name, values in times.items()}
        print(f"DNSMOS's paths in process, clips {kind}: ms a clip (speed-up over the line above)")
        for above, name in zip([None, *row], row, strict=False):
            gain = f"{row[above] / row[name]:.2f}x" if above is not None and "whole" not in name else ""
            print(f"  {name:<26} {row[name]:8.1f} {gain}")
    return out


def _table(runs: dict[str, list[dict[str, dict[str, float]]]]) -> dict[str, dict[str, float]]:
    """The medians over rounds of each mode, with its ratios to ``cer``, printed."""
    table: dict[str, dict[str, float]] = {}
    for mode, results in runs.items():
        table[mode] = {f"{c}_{k}": statistics.median(r[c][k] for r in results)
                       for c in ("c1", "c32") for k in ("per_request_s", "p50_s", "cpu_s")}
    base = table["cer"]
    print(f"{'mode':<20} {'c=1 p50 ms':>11} {'ratio':>6} {'c=32 ms/req':>12} {'ratio':>6} {'c=32 p50 ms':>12}"
          f" {'c=32 cpu ms/req':>16} {'ratio':>6}")
    for mode, row in table.items():
        row["c1_ratio"] = row["c1_p50_s"] / base["c1_p50_s"]
        row["c32_ratio"] = row["c32_per_request_s"] / base["c32_per_request_s"]
        row["c32_cpu_ratio"] = row["c32_cpu_s"] / base["c32_cpu_s"]
        print(f"{mode:<20} {row['c1_p50_s'] * 1000:>11.0f} {row['c1_ratio']:>6.2f} "
              f"{row['c32_per_request_s'] * 1000:>12.0f} {row['c32_ratio']:>6.2f} {row['c32_p50_s'] * 1000:>12.0f}"
              f" {row['c32_cpu_s'] * 1000:>16.0f} {row['c32_cpu_ratio']:>6.2f}")
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=64, help="requests at concurrency 32 (1/8 of it at 1)")
    parser.add_argument("--rounds", type=int, default=1, help="runs of the four modes, in turn")
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--sharing-only", action="store_true", help="only DNSMOS's paths, in process")
    args = parser.parse_args(argv)
    sharing = dnsmos_sharing(args.rounds)
    if args.sharing_only:
        if args.json:
            args.json.write_text(json.dumps({"dnsmos_paths": sharing}, indent=2))
        return 0
    runs: dict[str, dict[str, list[dict[str, dict[str, float]]]]] = {
        clips: {mode: [] for mode in MODES} for clips in CLIPS}
    for _ in range(args.rounds):
        for mode in MODES:
            for clips, result in _run_mode(mode, args.requests).items():
                runs[clips][mode].append(result)
    tables, met = {}, {}
    for clips, by_mode in runs.items():
        print(f"clips {clips}:")
        tables[clips] = _table(by_mode)
        both = tables[clips]["speaker+quality"]["c32_ratio"]
        met[clips] = both <= TARGET_C32
        print(f"target: speaker+quality / cer at c=32 <= {TARGET_C32}: {both:.2f} "
              f"({'met' if met[clips] else 'NOT met'})\n")
    if args.json:
        args.json.write_text(json.dumps({"dnsmos_paths": sharing, "clips": tables, "requests": args.requests,
                                         "rounds": args.rounds, "target_c32": TARGET_C32, "met": met}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
