"""Per-pair speed of error_rates against jiwer, measured side by side.

Run: python -m bench.scoring_speed [--pairs 2000] [--repeats 5]
Prints the median seconds per pass over all pairs for each implementation and the ratio.
Both compute CER and WER of the same normalized pairs and must agree exactly.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import jiwer

from audio_reward.scoring import error_rates

WORDS = (
    "the a of to and in is it you that he was for on are with as his they be at one have this from "
    "or had by hot word but what some we can out other were all there when up use your how said an each "
    "she which do their time if will way about many then them write would like so these her long make"
).split()


def make_pairs(n: int, seed: int) -> list[tuple[str, str]]:
    """Sentences of 8-30 words and an ASR-like hypothesis with word-level errors."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        ref = [rng.choice(WORDS) for _ in range(rng.randint(8, 30))]
        hyp = list(ref)
        for _ in range(rng.randint(0, 4)):
            pos = rng.randrange(len(hyp) + 1)
            op = rng.random()
            if op < 0.5 and pos < len(hyp):
                hyp[pos] = rng.choice(WORDS)
            elif op < 0.75:
                hyp.insert(pos, rng.choice(WORDS))
            elif pos < len(hyp):
                del hyp[pos]
        pairs.append((" ".join(ref), " ".join(hyp)))
    return pairs


def ours(pairs: list[tuple[str, str]]) -> list[tuple[float, float]]:
    out = []
    for ref, hyp in pairs:
        r = error_rates(ref, hyp, char_level_language=False)
        out.append((r.cer, r.wer))
    return out


def theirs(pairs: list[tuple[str, str]]) -> list[tuple[float, float]]:
    return [(jiwer.cer(ref, hyp), jiwer.wer(ref, hyp)) for ref, hyp in pairs]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=2000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    pairs = make_pairs(args.pairs, args.seed)
    a, b = ours(pairs), theirs(pairs)
    mismatches = sum(abs(x[0] - y[0]) > 1e-12 or abs(x[1] - y[1]) > 1e-12 for x, y in zip(a, b))
    if mismatches:
        print(f"error: {mismatches} of {len(pairs)} pairs differ from jiwer")
        return 1

    times: dict[str, list[float]] = {"audio_reward error_rates": [], "jiwer cer+wer": []}
    for _ in range(args.repeats):
        # Interleaved so both see the same machine load.
        for name, fn in (("audio_reward error_rates", ours), ("jiwer cer+wer", theirs)):
            start = time.perf_counter()
            fn(pairs)
            times[name].append(time.perf_counter() - start)

    medians = {name: statistics.median(t) for name, t in times.items()}
    print(f"{len(pairs)} pairs (CER and WER each), {args.repeats} repeats, values identical to jiwer")
    for name, median in medians.items():
        print(f"  {name:26s} median {median * 1e3:9.2f} ms/pass  {median / len(pairs) * 1e6:8.2f} us/pair")
    ratio = medians["jiwer cer+wer"] / medians["audio_reward error_rates"]
    print(f"  speed-up (jiwer / ours): {ratio:.1f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
