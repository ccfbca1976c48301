"""Protocol codec speed: encode + validate + decode of 10 s of 24 kHz audio.

Ours (encode_f32 + orjson on the client; parse_json + decode_score_request,
with every protocol check, on the server) against the plain way verl-omni's
client and reference scorer do it (json + base64 + numpy, minimal checks).
Both run interleaved in one process; prints medians and the ratio.

    python -m bench.protocol_codec [--seconds 10] [--rate 24000] [--repeats 200]
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import time

import numpy as np
import orjson

from audio_reward.protocol import decode_score_request, encode_f32, parse_json


def ours(wave: np.ndarray, rate: int) -> np.ndarray:
    body = orjson.dumps({
        "protocol_version": "1", "waveform_f32_base64": encode_f32(wave), "num_samples": int(wave.shape[0]),
        "sample_rate": rate, "prompt": "the quick brown fox", "metadata": {"index": 1},
    })
    return decode_score_request(parse_json(body)).waveform


def plain(wave: np.ndarray, rate: int) -> np.ndarray:
    body = json.dumps({
        "protocol_version": "1",
        "waveform_f32_base64": base64.b64encode(wave.astype("<f4").tobytes()).decode("ascii"),
        "num_samples": int(wave.shape[0]), "sample_rate": rate, "prompt": "the quick brown fox", "metadata": {"index": 1},
    }).encode()
    obj = json.loads(body)
    if obj.get("protocol_version") != "1":
        raise ValueError("version")
    arr = np.frombuffer(base64.b64decode(obj["waveform_f32_base64"]), dtype="<f4")
    if arr.shape[0] != obj["num_samples"] or not np.isfinite(arr).all():
        raise ValueError("audio")
    return arr


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rate", type=int, default=24_000)
    ap.add_argument("--repeats", type=int, default=200)
    args = ap.parse_args()
    wave = (np.random.default_rng(0).standard_normal(int(args.seconds * args.rate)) * 0.1).astype(np.float32)
    assert np.array_equal(ours(wave, args.rate), plain(wave, args.rate))
    times: dict[str, list[float]] = {"ours": [], "plain": []}
    for _ in range(args.repeats):
        for name, fn in (("ours", ours), ("plain", plain)):
            t0 = time.perf_counter()
            fn(wave, args.rate)
            times[name].append(time.perf_counter() - t0)
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    print(f"audio: {args.seconds:g} s at {args.rate} Hz ({wave.nbytes / 1e6:.2f} MB float32), {args.repeats} interleaved repeats")
    print(f"ours  (encode_f32 + orjson + decode_score_request): median {med['ours']:.2f} ms")
    print(f"plain (json + base64 + numpy, verl-omni style):     median {med['plain']:.2f} ms")
    print(f"ratio plain/ours: {med['plain'] / med['ours']:.2f}x  (>1 means ours is faster)")


if __name__ == "__main__":
    main()
