"""faster-whisper in-process, for ``bench/cpu_peers.py``: runs in its own venv and imports nothing of this project.

    <venv>/bin/python bench/cpu_peers_worker.py --model DIR --threads 2 --mode plain|batched --audio clips.npz

Loads ``WhisperModel`` once, warms it, prints one JSON line ``{"ready": true}``, then answers one JSON line per
command read from stdin, ``{"concurrency": c, "total": n}``: ``n`` utterances (the clips in turn), ``c`` at once,
as ``{"wall_s", "latencies", "texts", "errors"}``.  Decoding: beam 1, temperature 0 (no fallback), English, no
VAD, no timestamps, no conditioning on previous text.

- ``plain``: ``c`` threads, each calling ``WhisperModel.transcribe`` on one utterance at a time (what a program
  that calls faster-whisper from ``c`` request handlers does).
- ``batched``: ``BatchedInferencePipeline.transcribe`` on each group of ``c`` utterances joined end to end, cut
  back apart with ``clip_timestamps`` (one chunk per utterance) and decoded ``min(c, --max-batch)`` chunks per
  encoder/decoder call: the batched limit.  An utterance's latency is the time from its group's start until its
  segment comes out.
"""

from __future__ import annotations

import argparse
import json
import sys
import threading
import time
from typing import Any

import numpy as np

OPTIONS: dict[str, Any] = {"language": "en", "beam_size": 1, "temperature": 0.0, "without_timestamps": True}


def run_plain(plain: Any, clips: list[np.ndarray], c: int, total: int, latencies: dict[int, float],
              texts: dict[int, str]) -> int:
    """``total`` utterances through ``plain`` from ``c`` threads; the number that raised."""
    lock = threading.Lock()
    pending = list(range(total))
    errors = 0

    def worker() -> None:
        nonlocal errors
        while True:
            with lock:
                if not pending:
                    return
                i = pending.pop(0)
            t = time.perf_counter()
            try:
                texts[i] = plain(clips[i % len(clips)])
            except Exception:  # noqa: BLE001 - counted and reported, as a server's 500 would be
                errors += 1
            latencies[i] = time.perf_counter() - t

    threads = [threading.Thread(target=worker) for _ in range(c)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    return errors


def main() -> int:
    from faster_whisper import BatchedInferencePipeline, WhisperModel

    ap = argparse.ArgumentParser()
    ap.add_argument("--model", required=True)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--mode", choices=["plain", "batched"], required=True)
    ap.add_argument("--audio", required=True, help="npz of 16 kHz float32 clips clip0, clip1, ...")
    ap.add_argument("--max-batch", type=int, default=16)
    args = ap.parse_args()

    with np.load(args.audio) as npz:
        clips = [npz[f"clip{i}"].astype(np.float32) for i in range(len(npz.files))]
    model = WhisperModel(args.model, device="cpu", compute_type="default", cpu_threads=args.threads, num_workers=1,
                         local_files_only=True)
    pipeline = BatchedInferencePipeline(model=model)

    def plain(audio: np.ndarray) -> str:
        segments, _ = model.transcribe(audio, vad_filter=False, condition_on_previous_text=False, **OPTIONS)
        return "".join(s.text for s in segments).strip()

    def batched(indices: list[int], batch: int, t0: float, latencies: dict[int, float], texts: dict[int, str]) -> None:
        audio = np.concatenate([clips[i % len(clips)] for i in indices])
        bounds, start = [], 0
        for i in indices:
            n = len(clips[i % len(clips)])
            bounds.append({"start": start / 16000, "end": (start + n) / 16000})
            start += n
        starts = [b["start"] for b in bounds]
        segments, _ = pipeline.transcribe(audio, clip_timestamps=bounds, batch_size=batch, vad_filter=False,
                                          **OPTIONS)
        got: dict[int, list[str]] = {}
        for seg in segments:
            k = int(np.argmin([abs(seg.start - s) for s in starts]))
            got.setdefault(k, []).append(seg.text)
            latencies.setdefault(indices[k], time.perf_counter() - t0)
        for k, i in enumerate(indices):
            texts[i] = "".join(got.get(k, [])).strip()
            latencies.setdefault(i, time.perf_counter() - t0)

    plain(clips[0])  # warm-up: CTranslate2's lazy allocations
    batched([0, 1], 2, time.perf_counter(), {}, {})
    print(json.dumps({"ready": True}), flush=True)

    for line in sys.stdin:
        cmd = json.loads(line)
        c, total = int(cmd["concurrency"]), int(cmd["total"])
        latencies: dict[int, float] = {}
        texts: dict[int, str] = {}
        errors = 0
        t0 = time.perf_counter()
        if args.mode == "plain":
            errors = run_plain(plain, clips, c, total, latencies, texts)
        else:
            for g in range(0, total, c):
                group = list(range(g, min(total, g + c)))
                batched(group, min(c, args.max_batch), time.perf_counter(), latencies, texts)
        wall = time.perf_counter() - t0
        out = {"wall_s": wall, "latencies": [latencies[i] for i in sorted(latencies)],
               "texts": {str(i): texts.get(i, "") for i in range(total)}, "errors": errors}
        print(json.dumps(out), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
