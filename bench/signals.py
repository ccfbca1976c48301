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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
from pathlib import Path
from typing import Any

import httpx

from audio_reward.protocol import encode_f32, encode_file
from tests.testkit.server import running_server
from tests.testkit.speech import SENTENCES, espeak_speech, synth_speech

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
    args = parser.parse_args(argv)
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
        args.json.write_text(json.dumps({"clips": tables, "requests": args.requests, "rounds": args.rounds,
                                         "target_c32": TARGET_C32, "met": met}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
