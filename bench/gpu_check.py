"""The GPU check's measurements: the server against the engine's in-process limit, and a GRPO step's reward burst.

Run by ``scripts/gpu_check.sh`` (which installs what the device lacks first); by hand, from the checkout:

    python -m bench.gpu_check --mode cpu --assets .gpu-check/assets --out /tmp/gpu-check

For each model shape (Whisper large-v3; Qwen3-ASR-0.6B where this transformers has it; tiny ones with
``--mode cpu``), random weights built from the config with the end-of-text rows zeroed
(``tests.testkit.random_checkpoints``, ``never_stop``), so every clip decodes exactly its token cap
and the work per clip is the real one:

- the limit: the transformers engine in-process, one ``transcribe_batch_sync`` call per batch, at
  each batch size of the sweep; the best is the limit (audio seconds per wall second);
- the server: ``audio-reward serve`` (``python -m audio_reward.cli serve``, the transformers engine on
  the same device, ``--max-batch-size`` the limit's best batch, every other setting its default) on
  loopback, and the async client's ``score`` with 1, 32 and 128 requests in flight; each against the limit;
- the burst: a GRPO step's clips (512 of 3-15 s on a GPU) sent all at once the way the trainer
  plugin sends them: :class:`~audio_reward.trainer_plugin.remote_scorer.AudioRewardScorer` (the reward
  manager's core) coalesces them into batches for the async client's ``score_many``, which sends
  chunks and retries; the seconds until the last reward, against the limit's time for the same audio.

Clips are the prepared speech (hibari-tts, 16 kHz) cut and joined to lengths drawn from 3-15 s.  The
results go to ``OUT/gpu_check.json`` (one line) and ``OUT/gpu_check.txt`` (a table), and stdout ends
with the JSON line.  Exit 1 when a figure the check promises is missing (CI runs ``--mode cpu``).
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import importlib.util
import json
import os
import platform
import shutil
import statistics
import sys
import time
from collections.abc import Callable, Coroutine, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from bench.engine_throughput import SENTENCES, load_speech

RATE = 16_000
CONCURRENCIES = (1, 32, 128)
REQUIRED = ("device", "limit_audio_s_per_s", "server_audio_s_per_s", "ratio_c128", "burst_s", "burst_vs_limit")
"""The figures the check promises (issue 39); a missing one fails the run."""


@dataclass(frozen=True)
class Profile:
    """How much to measure: sizes for the lent GPU (8 minutes in all) or for a CPU in CI (a couple)."""

    size: str
    device: str
    limit_clips: int
    batches: tuple[int, ...]
    requests: dict[int, int]
    """Requests sent at each concurrency."""
    burst: int
    min_s: float = 3.0
    max_s: float = 15.0
    cpu_threads: int = 0
    """torch's intra-op threads for the engine, in-process and in the server (0: torch's default)."""


PROFILES = {
    "gpu": Profile("full", "cuda", limit_clips=128, batches=(32, 64, 128), requests={1: 6, 32: 128, 128: 256},
                   burst=512),
    # A CPU decodes a token in tens of milliseconds even for a tiny model (generate's own overhead), so CI's clips
    # are 1-2.5 s (16-20 tokens each): the same steps in about a minute.
    # One torch thread: on a shared 2-core machine (CI) two threads of a tiny model spin-wait on each other while
    # other processes hold a core, and a batch took 20 times as long (10.5 s against 0.53 s here).
    "cpu": Profile("tiny", "cpu", limit_clips=8, batches=(4, 8), requests={1: 2, 32: 16, 128: 24}, burst=24,
                   min_s=1.0, max_s=2.5, cpu_threads=1),
}


class Budget:
    """Seconds left of the check's time; a phase that would not fit is skipped and says so."""

    def __init__(self, seconds: float) -> None:
        self.end = time.monotonic() + seconds

    def left(self) -> float:
        return self.end - time.monotonic()

    def require(self, seconds: float, what: str) -> None:
        if self.left() < seconds:
            raise TimeoutError(f"{what} skipped: {self.left():.0f} s of the budget left, it needs about {seconds:.0f}")


def make_clips(speech: list[np.ndarray], count: int, profile: Profile, seed: int) -> list[tuple[np.ndarray, str]]:
    """``count`` clips of ``min_s``-``max_s`` seconds: prepared sentences joined (0.2 s apart) and cut to length.

    Each clip's text is the sentences it holds, as a trainer's target would be; the random model's
    transcript is garbage anyway, so the text only sets the scoring's (small) cost.
    """
    rng = np.random.default_rng(seed)
    gap = np.zeros(RATE // 5, dtype=np.float32)
    clips = []
    for _ in range(count):
        target = int(rng.uniform(profile.min_s, profile.max_s) * RATE)
        parts: list[np.ndarray] = []
        words: list[str] = []
        while sum(len(p) for p in parts) < target:
            k = int(rng.integers(len(speech)))
            parts += [speech[k], gap]
            words.append(SENTENCES[k % len(SENTENCES)])
        clips.append((np.concatenate(parts)[:target].astype(np.float32), " ".join(words)))
    return clips


def audio_seconds(clips: list[tuple[np.ndarray, str]]) -> float:
    return sum(len(c) for c, _ in clips) / RATE


def has_qwen3_asr() -> str | None:
    """None when this transformers has native Qwen3-ASR (the engine's and the builder's classes), else why not."""
    import transformers

    if importlib.util.find_spec("transformers.models.qwen3_asr") is None:
        return f"transformers {transformers.__version__} has no native Qwen3-ASR"
    return None


def build_checkpoint(arch: str, profile: Profile, assets: Path, work: Path) -> tuple[str, str]:
    """(folder, description) of the random checkpoint, built once per work folder by the bench's own builder."""
    from bench.engine_throughput import build_model

    args = argparse.Namespace(model=None, arch=arch, size=profile.size, device=profile.device, assets=assets)
    return build_model(args, work)


def release_device() -> None:
    """Free what a closed engine left on the GPU before the server loads its own copy."""
    gc.collect()
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.empty_cache()
    except ImportError:  # the server environment always has torch; a bare import check need not
        pass


def measure_limit(model: str, clips: list[tuple[np.ndarray, str]], profile: Profile, budget: Budget) -> dict[str, Any]:
    """The engine in-process at each batch size: one call per batch (as bench.engine_throughput measures it)."""
    from audio_reward.scorer_server.app import limit_numpy_threads
    from audio_reward.scorer_server.config import ServerConfig
    from audio_reward.scorer_server.engines import EngineConfig, TranscriptionInput, create_engine
    from audio_reward.scorer_server.engines.base import max_new_tokens_for

    # The server's own numpy thread limit (its default), so the limit and the server run the engine alike.
    limit_numpy_threads(ServerConfig.model_fields["numpy_threads"].default)
    items = [TranscriptionInput(c, "en") for c, _ in clips]
    total = audio_seconds(clips)
    config = EngineConfig(model=model, device=profile.device, max_batch_size=max(profile.batches),
                          cpu_threads=profile.cpu_threads)
    engine: Any = create_engine("transformers", config)
    engine.load()
    by_batch: dict[str, float] = {}
    tokens: list[int] = []
    try:
        engine.warmup()
        for batch in profile.batches:
            # Two passes, the faster counts: a pass meets shapes the first time (each clip length, each decode
            # step at this batch size), and their one-time cost (kernel choice, oneDNN primitives) is no limit.
            for _ in range(2):
                budget.require(30 if profile.device == "cuda" else 5, f"limit at batch {batch}")
                t0 = time.perf_counter()
                found: list[int] = []
                for start in range(0, len(items), batch):
                    found += [r.num_tokens or 0 for r in engine.transcribe_batch_sync(items[start : start + batch])]
                speed = round(total / (time.perf_counter() - t0), 2)
                by_batch[str(batch)] = max(speed, by_batch.get(str(batch), 0.0))
                tokens = found
    except TimeoutError as exc:
        if not by_batch:
            raise
        print(f"  {exc}", flush=True)
    finally:
        engine.close()
        del engine
        release_device()
    best = max(by_batch, key=lambda b: by_batch[b])
    cap = statistics.fmean(max_new_tokens_for(len(c) / RATE) for c, _ in clips)
    return {"limit_audio_s_per_s": by_batch[best], "limit_batch": int(best), "limit_by_batch": by_batch,
            "tokens_per_clip": round(statistics.fmean(tokens), 1), "cap_tokens_per_clip": round(cap, 1)}


def metric_totals(text: str) -> dict[str, float]:
    """The server's request answers by status, utterances and engine calls, from its Prometheus text."""
    from prometheus_client.parser import text_string_to_metric_families

    out: dict[str, float] = {"refused": 0.0, "batches": 0.0, "batched_items": 0.0}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "audio_reward_requests_total" and sample.labels.get("status") != "200":
                out["refused"] += sample.value
            elif sample.name == "audio_reward_batch_size_count":
                out["batches"] += sample.value
            elif sample.name == "audio_reward_batch_size_sum":
                out["batched_items"] += sample.value
    return out


async def scrape(url: str) -> dict[str, float]:
    import aiohttp

    async with aiohttp.ClientSession() as session, session.get(f"{url}/metrics") as resp:
        return metric_totals(await resp.text())


def delta(before: dict[str, float], after: dict[str, float]) -> dict[str, Any]:
    """Non-200 answers (each one a retry the client made) and the mean engine batch between two scrapes."""
    batches = after["batches"] - before["batches"]
    items = after["batched_items"] - before["batched_items"]
    return {"non_200": int(after["refused"] - before["refused"]),
            "mean_engine_batch": round(items / batches, 1) if batches else None}


async def concurrency_run(url: str, clips: list[tuple[np.ndarray, str]], concurrency: int) -> dict[str, Any]:
    """Every clip one ``score`` request of the async client, ``concurrency`` in flight; audio s per wall s."""
    from audio_reward.scorer_client import AsyncScorerClient

    slots = asyncio.Semaphore(concurrency)
    async with AsyncScorerClient(url, pool_limit=max(concurrency, 1), timeout=1800) as client:
        async def one(clip: np.ndarray, text: str) -> float:
            async with slots:
                t0 = time.perf_counter()
                await client.score(clip, RATE, text, language="en")
                return time.perf_counter() - t0

        before = await scrape(url)
        t0 = time.perf_counter()
        latencies = await asyncio.gather(*(one(c, t) for c, t in clips))
        wall = time.perf_counter() - t0
        after = await scrape(url)
    return {"audio_s_per_s": round(audio_seconds(clips) / wall, 2), "requests": len(clips),
            "p50_s": round(statistics.median(latencies), 3), **delta(before, after)}


async def burst_run(url: str, clips: list[tuple[np.ndarray, str]]) -> dict[str, Any]:
    """A GRPO step's rewards: every clip a concurrent ``AudioRewardScorer.score``, as verl's reward loop awaits them."""
    from audio_reward.trainer_plugin import PluginSettings
    from audio_reward.trainer_plugin.remote_scorer import AudioRewardScorer
    from audio_reward.trainer_plugin.samples import AudioSample

    # As the trainer's config block gives them (flat keys): the plugin's own client defaults apply.
    settings = PluginSettings.model_validate({"server_url": url, "failure_policy": "mask", "language": "en"})
    scorer = AudioRewardScorer(settings)
    samples = [AudioSample(waveform=c, sample_rate=RATE, text=t, sample_id=f"burst-{i}")
               for i, (c, t) in enumerate(clips)]
    try:
        before = await scrape(url)
        t0 = time.perf_counter()
        results = await asyncio.gather(*(scorer.score(s) for s in samples))
        wall = time.perf_counter() - t0
        after = await scrape(url)
    finally:
        await scorer.aclose()
    failed = sum(int(r.extra_info["score_failed"]) for r in results)
    return {"burst_s": round(wall, 3), "burst_clips": len(clips), "burst_audio_s": round(audio_seconds(clips), 1),
            "burst_failed": failed, "burst_client_batches": len(scorer.batches),
            **{f"burst_{k}": v for k, v in delta(before, after).items()}}


@contextmanager
def scorer_server(model: str, profile: Profile, batch: int, out: Path, ready_timeout_s: float) -> Iterator[str]:
    """``audio-reward serve`` with the transformers engine on loopback; its log is kept in ``out``."""
    from tests.testkit.server import running_server

    handle = None
    try:
        with running_server(python=sys.executable, ready_timeout_s=ready_timeout_s, engine="transformers",
                            model=model, device=profile.device, max_batch_size=batch, language="en",
                            cpu_threads=profile.cpu_threads) as handle:
            yield handle.url
    finally:
        if handle is not None and handle.log_path.exists():
            shutil.copyfile(handle.log_path, out / f"server-{Path(model).name}.log")


def bounded(coro: Coroutine[Any, Any, dict[str, Any]], budget: Budget, what: str) -> dict[str, Any]:
    """Run ``coro`` to its end or to the budget's (less a margin to stop the server and write the results)."""
    seconds = max(budget.left() - 30.0, 5.0)

    async def run() -> dict[str, Any]:
        try:
            return await asyncio.wait_for(coro, seconds)
        except asyncio.TimeoutError:
            raise TimeoutError(f"{what} stopped: not done within the budget's {seconds:.0f} s") from None

    return asyncio.run(run())


def server_phases(url: str, pool: list[tuple[np.ndarray, str]], burst: list[tuple[np.ndarray, str]], rate: float,
                  profile: Profile, budget: Budget, result: dict[str, Any]) -> None:
    """Each concurrency, then the burst, into ``result`` as they finish (a phase cut short keeps the ones before)."""
    for c in CONCURRENCIES:
        clips = pool[: profile.requests[c]]
        # Twice the limit's time for these clips (one at a time costs more: the c=1 floor), plus start-up.
        budget.require(max(2 * audio_seconds(clips) / rate, 40.0 if profile.device == "cuda" else 5.0),
                       f"server at concurrency {c}")
        run = bounded(concurrency_run(url, clips, c), budget, f"server at concurrency {c}")
        result["server_audio_s_per_s"][str(c)] = run["audio_s_per_s"]
        result["server_vs_limit"][str(c)] = round(run["audio_s_per_s"] / rate, 3)
        result["server_runs"][str(c)] = run
    result["ratio_c128"] = result["server_vs_limit"]["128"]
    expected = audio_seconds(burst) / rate
    budget.require(2 * expected + 10, "burst")
    result.update(bounded(burst_run(url, burst), budget, "burst"))
    result["burst_limit_s"] = round(expected, 3)
    result["burst_vs_limit"] = round(result["burst_s"] / expected, 3)


def measure_server(model: str, pool: list[tuple[np.ndarray, str]], burst: list[tuple[np.ndarray, str]],
                   limit: dict[str, Any], profile: Profile, out: Path, budget: Budget) -> dict[str, Any]:
    """The server at each concurrency, then the burst, against the limit; what failed or did not fit is ``error``."""
    rate = limit["limit_audio_s_per_s"]
    result: dict[str, Any] = {"server_audio_s_per_s": {}, "server_vs_limit": {}, "server_runs": {}}
    try:
        budget.require(90 if profile.device == "cuda" else 20, "server start")
        with scorer_server(model, profile, limit["limit_batch"], out, min(600.0, budget.left())) as url:
            warm = pool[: limit["limit_batch"]]  # full batches, so the timed runs meet no new batch shape first
            bounded(concurrency_run(url, warm, limit["limit_batch"]), budget, "server warm-up")
            server_phases(url, pool, burst, rate, profile, budget, result)
    except Exception as exc:  # noqa: BLE001 - the limit and the phases done stay in the results, the error beside them
        print(f"  {type(exc).__name__}: {exc}", flush=True)
        result["error"] = f"{type(exc).__name__}: {exc}"[:500]
    return result


def measure_arch(arch: str, profile: Profile, assets: Path, work: Path, out: Path, budget: Budget) -> dict[str, Any]:
    """Everything for one model shape; a phase that fails or does not fit is named in ``error``."""
    speech = load_speech(assets, len(SENTENCES))
    pool = make_clips(speech, max(profile.limit_clips, *profile.requests.values()), profile, seed=1)
    burst = make_clips(speech, profile.burst, profile, seed=2)
    result: dict[str, Any] = {"arch": arch}
    budget.require(90 if profile.device == "cuda" else 10, "building and loading the model")
    model, result["model"] = build_checkpoint(arch, profile, assets, work)
    print(f"== {arch}: {result['model']} at {model}", flush=True)
    result.update(measure_limit(model, pool[: profile.limit_clips], profile, budget))
    print(f"  limit: {result['limit_audio_s_per_s']} audio s/s at batch {result['limit_batch']}", flush=True)
    result.update(measure_server(model, pool, burst, result, profile, out, budget))
    return result


def guarded(what: str, run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """``run()``, or ``{"error": ...}`` naming what failed: one shape's failure must not lose the other's figures."""
    try:
        return run()
    except Exception as exc:  # noqa: BLE001 - the check reports every failure in its JSON and goes on
        print(f"  {what} failed: {type(exc).__name__}: {exc}", flush=True)
        return {"error": f"{type(exc).__name__}: {exc}"[:500]}


def quiet_transformers() -> None:
    """No progress bars and no per-call generation advice on the console: the table and the JSON line are the output."""
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def device_name(profile: Profile) -> str:
    import torch

    if profile.device.startswith("cuda") and torch.cuda.is_available():
        return str(torch.cuda.get_device_name(0))
    return f"cpu ({platform.machine()}, {os.cpu_count()} cores)"


def versions() -> dict[str, str]:
    import torch
    import transformers

    return {"python": platform.python_version(), "torch": torch.__version__, "transformers": transformers.__version__}


def table(summary: dict[str, Any]) -> str:
    """The results as a table: one row per shape and way of calling the engine."""
    lines = [f"GPU check on {summary['device']} ({summary['versions']}), {summary['wall_s']} s",
             f"{'model':28} {'via':22} {'audio s/s':>10} {'vs limit':>9}  notes"]
    for arch in ("whisper", "qwen3_asr"):
        r = summary[arch]
        if "limit_audio_s_per_s" not in r:
            lines.append(f"{arch:28} {'-':22} {'-':>10} {'-':>9}  {r.get('skipped') or r.get('error')}")
            continue
        lines.append(f"{r['model']:28} {'in-process (limit)':22} {r['limit_audio_s_per_s']:>10} {'1.00x':>9}  "
                     f"batch {r['limit_batch']} of {r['limit_by_batch']}; {r['tokens_per_clip']} tokens/clip "
                     f"(cap {r['cap_tokens_per_clip']})")
        for c, speed in r.get("server_audio_s_per_s", {}).items():
            run = r["server_runs"][c]
            lines.append(f"{r['model']:28} {'server, c=' + c:22} {speed:>10} {r['server_vs_limit'][c]:>8}x  "
                         f"{run['requests']} requests, p50 {run['p50_s']} s, mean engine batch "
                         f"{run['mean_engine_batch']}, non-200 {run['non_200']}")
        if "burst_s" in r:
            lines.append(f"{r['model']:28} {'GRPO burst (plugin)':22} {'-':>10} {r['burst_vs_limit']:>8}x  "
                         f"{r['burst_clips']} clips, {r['burst_audio_s']} s audio: last reward at {r['burst_s']} s "
                         f"(limit {r['burst_limit_s']} s); failed {r['burst_failed']}, non-200 {r['burst_non_200']}")
        if "error" in r:
            lines.append(f"{'':28} {'error':22} {r['error']}")
    lines.append("vs limit: server audio s/s over the in-process limit's; burst: seconds to the last reward over the "
                 "limit's seconds for the same audio (above 1 is slower).")
    return "\n".join(lines)


def summarize(whisper: dict[str, Any], qwen: dict[str, Any], profile: Profile, wall_s: float) -> dict[str, Any]:
    """The JSON line: Whisper's figures at the top level (the keys the issue names), each shape's in full below."""
    keys = ("model", "limit_audio_s_per_s", "limit_batch", "server_audio_s_per_s", "server_vs_limit", "ratio_c128",
            "burst_s", "burst_vs_limit", "burst_clips", "burst_audio_s", "burst_failed", "burst_non_200",
            "tokens_per_clip", "cap_tokens_per_clip")
    summary: dict[str, Any] = {"device": device_name(profile), "mode": "gpu" if profile.size == "full" else "cpu"}
    summary.update({k: whisper.get(k) for k in keys})
    summary.update(whisper=whisper, qwen3_asr=qwen, versions=versions(), wall_s=round(wall_s, 1))
    return summary


def wheels_smoke(assets: Path, out: Path) -> dict[str, Any]:
    """The wheelhouse on a Python that has no torch (the device's version, in CI): the real server and client stack.

    The instant engine (``tests.testkit.instant_engine``) stands in for the model behind ``audio-reward serve``;
    the async client at 32 in flight and the plugin's burst must score every clip (each says its own number,
    so every reward is 1).  What the wheels lack at import or at serving time fails here.
    """
    from tests.testkit.instant_engine import clip, prompt_of
    from tests.testkit.server import running_server

    clips = [(clip(i, seconds=1.0), prompt_of(i)) for i in range(64)]
    handle = None
    try:
        # The model is a local folder the instant engine ignores: the default, the packaged tiny.en, does not travel.
        with running_server(python=sys.executable, instant=True, max_wait_ms=5, model=str(assets)) as handle:
            run = asyncio.run(concurrency_run(handle.url, clips, 32))
            burst = asyncio.run(burst_run(handle.url, clips))
    finally:
        if handle is not None and handle.log_path.exists():
            shutil.copyfile(handle.log_path, out / "server-instant.log")
    return {"device": f"cpu ({platform.machine()})", "mode": "wheels", "python": platform.python_version(),
            "requests": run["requests"], "non_200": run["non_200"], "burst_clips": burst["burst_clips"],
            "burst_failed": burst["burst_failed"]}


def write_results(summary: dict[str, Any], out: Path) -> tuple[str, str]:
    """``gpu_check.txt`` (the table) and ``gpu_check.json`` (one line) in ``out``; returns both texts."""
    text = table(summary)
    line = json.dumps(summary, separators=(",", ":"))
    (out / "gpu_check.txt").write_text(text + "\n", encoding="utf-8")
    (out / "gpu_check.json").write_text(line + "\n", encoding="utf-8")
    return text, line


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mode", choices=[*sorted(PROFILES), "wheels"], default="gpu",
                        help="gpu, cpu (tiny shapes), or wheels (the server stack without torch, instant engine)")
    parser.add_argument("--assets", type=Path, required=True, help="speech.npz and whisper-tokenizer/ (prepared)")
    parser.add_argument("--out", type=Path, required=True, help="gpu_check.json, gpu_check.txt and server logs")
    parser.add_argument("--work", type=Path, default=Path(os.environ.get("TMPDIR", "/tmp")) / "audio-reward-gpu-check",
                        help="random checkpoints (large-v3 is 3 GB)")
    parser.add_argument("--budget-s", type=float, default=420.0, help="seconds the measurements may take in all")
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    if args.mode == "wheels":
        smoke = wheels_smoke(args.assets, args.out)
        line = json.dumps(smoke, separators=(",", ":"))
        (args.out / "gpu_check.json").write_text(line + "\n", encoding="utf-8")
        print(line, flush=True)
        return 0 if smoke["burst_failed"] == 0 and smoke["non_200"] == 0 else 1
    profile = PROFILES[args.mode]
    started = time.monotonic()
    quiet_transformers()
    budget = Budget(args.budget_s)
    args.work.mkdir(parents=True, exist_ok=True)
    whisper = guarded("whisper", lambda: measure_arch("whisper", profile, args.assets, args.work, args.out, budget))
    # Whisper's figures are on disk before Qwen3-ASR starts: if the device's time runs out, they come back anyway.
    write_results(summarize(whisper, {"skipped": "not measured yet"}, profile, time.monotonic() - started), args.out)
    why_not = has_qwen3_asr()
    if why_not:
        print(f"== qwen3_asr skipped: {why_not}", flush=True)
        qwen: dict[str, Any] = {"skipped": why_not}
    else:
        qwen = guarded("qwen3_asr", lambda: measure_arch("qwen3_asr", profile, args.assets, args.work, args.out,
                                                        budget))
    summary = summarize(whisper, qwen, profile, time.monotonic() - started)
    text, line = write_results(summary, args.out)
    print(text, flush=True)
    missing = [k for k in REQUIRED if summary.get(k) is None]
    speeds = summary["server_audio_s_per_s"] or {}
    missing += [f"server_audio_s_per_s[{c}]" for c in CONCURRENCIES if str(c) not in speeds]
    if missing:
        print(f"missing figures: {', '.join(missing)}", flush=True)
    print(line, flush=True)
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
