"""What detecting the language costs: a multilingual model without ``language`` against the same request with it.

    python -m bench.language_detection [--model base] [--engines faster-whisper transformers] [--repeats 5]

Each engine transcribes the same English utterances (hibari-tts speech) once
with ``language="en"`` and once with no language, alternating, ``--repeats``
times; it prints the median wall time of each and their ratio.  Detection
reads the encoder output the transcription then decodes from, so the extra
cost is one decoder step per utterance (target: at most 1.1x).  Before this
engine design the encoder ran twice without a language (0.61x the throughput
measured with Whisper base on CPU).  The last line is one JSON object;
the exit status is 1 when a ratio exceeds ``--target``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

from bench.engine_throughput import SENTENCES as _ALL_SENTENCES

REPO = Path(__file__).resolve().parents[1]

SENTENCES = _ALL_SENTENCES[:4]


def speech() -> list[np.ndarray]:
    from tests.testkit.speech import speech_16k

    return [speech_16k(text) for text in SENTENCES]


def measure(engine_name: str, model: str, clips: list[np.ndarray], repeats: int, batch: int,
            threads: int) -> dict[str, float]:
    from audio_reward.scorer_server.engines import (
        EngineConfig,
        TranscriptionInput,
        create_engine,
    )

    engine = create_engine(engine_name, EngineConfig(model=model, max_batch_size=batch, cpu_threads=threads))
    engine.load()
    try:
        engine.warmup()
        with_language = [TranscriptionInput(a, "en") for a in clips]
        without = [TranscriptionInput(a, None) for a in clips]
        detected = engine.transcribe_batch_sync(without)  # type: ignore[attr-defined]
        if any(t.language != "en" for t in detected):
            raise SystemExit(f"{engine_name}: detected {[t.language for t in detected]} on English speech")
        times: dict[str, list[float]] = {"with": [], "without": []}
        for _ in range(repeats):
            for key, items in (("with", with_language), ("without", without)):
                t0 = time.perf_counter()
                for start in range(0, len(items), batch):
                    engine.transcribe_batch_sync(items[start : start + batch])  # type: ignore[attr-defined]
                times[key].append(time.perf_counter() - t0)
    finally:
        engine.close()
    w, wo = statistics.median(times["with"]), statistics.median(times["without"])
    return {"with_language_s": round(w, 3), "without_language_s": round(wo, 3), "ratio": round(wo / w, 3)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="base", help="a multilingual model (default: the packaged Whisper base)")
    ap.add_argument("--engines", nargs="+", default=["faster-whisper", "transformers"])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--batch", type=int, default=4, help="utterances per engine call")
    ap.add_argument("--threads", type=int, default=0, help="engine threads (1 is steadier on a shared machine)")
    ap.add_argument("--target", type=float, default=1.1)
    args = ap.parse_args()
    clips = speech()
    print(f"{len(clips)} utterances, {sum(len(c) for c in clips) / 16000:.1f} s of English speech; model {args.model}; "
          f"median of {args.repeats} runs each", flush=True)
    result: dict[str, dict[str, float]] = {}
    for name in args.engines:
        row = measure(name, args.model, clips, args.repeats, args.batch, args.threads)
        result[name] = row
        print(f"{name:15} with language {row['with_language_s']:.3f} s, without {row['without_language_s']:.3f} s: "
              f"{row['ratio']:.3f}x", flush=True)
    print(json.dumps({f"{k}_without_vs_with_language": v["ratio"] for k, v in result.items()}), flush=True)
    return 1 if any(v["ratio"] > args.target for v in result.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
