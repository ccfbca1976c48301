"""Protocol codec speed: encode + validate + decode of 10 s of 24 kHz audio, and the score answer's encoding.

Request: ours (the client's body, built from the ScoreRequest model by
``wire.prepare``; parse_json + decode_score_request, with every protocol
check, on the server) against the plain way verl-omni's client and reference
scorer do it (json + base64 + numpy, minimal checks).

Response: a real score answer (the scoring diagnostics and the server's
fields) encoded the way the server does it (ScoreResponse validated, then
model_dump + orjson) against the plain dict + orjson it sent before the answer
was a model.  Each pair runs interleaved in one process; prints medians and
the ratios.

    python -m bench.protocol_codec [--seconds 10] [--rate 24000] [--repeats 200]
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import orjson

from audio_reward.protocol import PROTOCOL_VERSION, RewardPolicy, ScoreResponse, decode_score_request, parse_json
from audio_reward.scorer_client.wire import ScoreItem, prepare
from audio_reward.scorer_server.http.responses import score_json
from audio_reward.scoring import get_normalizer, score_transcript


def ours(wave: np.ndarray, rate: int) -> np.ndarray:
    body = prepare(ScoreItem(wave, rate, "the quick brown fox", metadata={"index": 1})).body
    return decode_score_request(parse_json(body)).waveform


def plain(wave: np.ndarray, rate: int) -> np.ndarray:
    body = json.dumps({
        "protocol_version": "1",
        "waveform_f32_base64": base64.b64encode(wave.astype("<f4").tobytes()).decode("ascii"),
        "num_samples": int(wave.shape[0]), "sample_rate": rate, "prompt": "the quick brown fox",
        "metadata": {"index": 1},
    }).encode()
    obj = json.loads(body)
    if obj.get("protocol_version") != "1":
        raise ValueError("version")
    arr = np.frombuffer(base64.b64decode(obj["waveform_f32_base64"]), dtype="<f4")
    if arr.shape[0] != obj["num_samples"] or not np.isfinite(arr).all():
        raise ValueError("audio")
    return arr


def answer_fields() -> dict[str, Any]:
    """What the server answers for one utterance: the scoring diagnostics and its own fields."""
    text = "The quick brown fox jumps over the lazy dog."
    scored = score_transcript(text, "the quick brown fox jumped over a lazy dog", normalizer=get_normalizer("basic"),
                              policy=RewardPolicy(), language="en", duration_s=3.1, reference_duration_s=None)
    return scored.response(model="tiny.en", engine="faster-whisper", protocol_version=PROTOCOL_VERSION,
                           request_id="0f" * 16).model_dump(exclude_none=True)


def interleaved(pair: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each callable, run in turns."""
    times: dict[str, list[float]] = {name: [] for name in pair}
    for _ in range(repeats):
        for name, fn in pair.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in times.items()}


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
    print(f"audio: {args.seconds:g} s at {args.rate} Hz ({wave.nbytes / 1e6:.2f} MB float32), "
          f"{args.repeats} interleaved repeats")
    print(f"ours  (wire.prepare + decode_score_request):        median {med['ours']:.2f} ms")
    print(f"plain (json + base64 + numpy, verl-omni style):     median {med['plain']:.2f} ms")
    print(f"ratio plain/ours: {med['plain'] / med['ours']:.2f}x  (>1 means ours is faster)")

    fields = answer_fields()
    assert score_json(ScoreResponse.model_validate(fields)) == orjson.dumps(fields)
    batch = 1000  # one answer takes microseconds: time a thousand per turn
    encode = interleaved({
        "model": lambda: [score_json(ScoreResponse.model_validate(fields)) for _ in range(batch)],
        "dict": lambda: [orjson.dumps(dict(fields)) for _ in range(batch)],
    }, max(20, args.repeats // 4))
    us = {k: v / batch * 1e6 for k, v in encode.items()}
    print(f"score answer ({len(fields)} keys, {len(orjson.dumps(fields))} bytes), the same bytes both ways:")
    print(f"model (ScoreResponse validated + model_dump + orjson): median {us['model']:.2f} us")
    print(f"dict  (dict + orjson, the untyped answer):             median {us['dict']:.2f} us")
    print(f"ratio dict/model: {us['dict'] / us['model']:.2f}x; the model costs {us['model'] - us['dict']:.2f} us "
          f"an answer, {100 * (us['model'] - us['dict']) / (med['ours'] * 1e3):.2f} % of the request codec above")


if __name__ == "__main__":
    main()
