"""``audio-reward score`` and ``audio-reward eval``: the client's commands.

Only argparse is imported here; the client and its dependencies load when a
command runs.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any


def _client_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scorer connection (defaults: AUDIO_REWARD_* variables, then built-in)")
    g.add_argument("--url", action="append", dest="urls", metavar="URL",
                   help="scorer base URL; repeat for several servers (default: $AUDIO_REWARD_URL)")
    g.add_argument("--api-key", help="API key (default: $AUDIO_REWARD_API_KEY)")
    g.add_argument("--timeout", type=float, help="seconds per attempt")
    g.add_argument("--deadline", type=float, help="seconds per request across all attempts")
    g.add_argument("--max-retries", type=int, help="retries of transient faults")
    g.add_argument("--concurrency", type=int, help="batch requests in flight")
    g.add_argument("--chunk-size", type=int, help="items per batch request")


def register(subparsers: "argparse._SubParsersAction[argparse.ArgumentParser]") -> None:
    score = subparsers.add_parser("score", help="score audio files against a text on a scorer server",
                                  description="Score WAV/FLAC files: prints the score and diagnostics of each.")
    score.add_argument("files", nargs="+", metavar="FILE", help="WAV or FLAC files (multi-channel is averaged)")
    score.add_argument("--text", required=True, help="the text the speech should say")
    score.add_argument("--language", help="language code of the text, e.g. en")
    score.add_argument("--json", action="store_true", help="one JSON object per file instead of tables")
    _client_options(score)
    score.set_defaults(func=_score)

    ev = subparsers.add_parser(
        "eval", help="evaluate a manifest of utterances: CER/WER report, score distribution, plots",
        description="Score every row of a JSONL manifest ({audio, text, [language], [id]}; audio paths relative "
                    "to the manifest) and write utterances.jsonl, summary.json, summary.md and PNG plots. "
                    "Running it again on the same --out resumes: scored ids are skipped.")
    ev.add_argument("manifest", metavar="MANIFEST.jsonl")
    ev.add_argument("--out", required=True, metavar="DIR", help="output folder (created; reused to resume)")
    ev.add_argument("--language", help="language for rows that do not name one")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    _client_options(ev)
    ev.set_defaults(func=_eval)


def _settings(args: argparse.Namespace) -> Any:
    from .settings import ClientSettings

    return ClientSettings.from_env(
        args.urls, api_key=args.api_key, timeout=args.timeout, deadline=args.deadline,
        max_retries=args.max_retries, concurrency=args.concurrency, chunk_size=args.chunk_size,
    )


def _score(args: argparse.Namespace) -> int:
    import json

    from .errors import ScorerError
    from .evaluate import read_audio
    from .sync_client import ScorerClient
    from .wire import ScoreItem, ScoreResult

    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"audio-reward score: {exc}", file=sys.stderr)
        return 2
    outcomes: dict[str, ScoreResult | ScorerError | str] = {}
    items, names = [], []
    for name in args.files:
        try:
            samples, rate = read_audio(name)
        except Exception as exc:  # soundfile raises LibsndfileError, RuntimeError, TypeError…
            outcomes[name] = f"cannot read {name}: {exc}"
            continue
        items.append(ScoreItem(samples, rate, args.text, language=args.language))
        names.append(name)
    if items:
        with ScorerClient(settings=settings) as client:
            for name, outcome in zip(names, client.score_many(items)):
                outcomes[name] = outcome
    failed = 0
    for name in args.files:
        outcome = outcomes[name]
        if isinstance(outcome, ScoreResult):
            row: dict[str, Any] = {"file": name, **outcome.to_dict()}
        else:
            failed += 1
            row = {"file": name, "error": {"type": type(outcome).__name__ if not isinstance(outcome, str)
                                           else "AudioFileError", "message": str(outcome)}}
        if args.json:
            print(json.dumps(row, ensure_ascii=False))
        else:
            _print_table(row)
    return 1 if failed else 0


def _print_table(row: dict[str, Any]) -> None:
    flat = dict(row)
    error = flat.pop("error", None)
    if error:
        flat["error"] = f"{error['type']}: {error['message']}"
    width = max(len(k) for k in flat)
    for key, value in flat.items():
        text = f"{value:.4f}" if isinstance(value, float) else str(value)
        print(f"{key:<{width}}  {text}")
    print()


def _eval(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    from .evaluate import ManifestError, run_eval

    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"audio-reward eval: {exc}", file=sys.stderr)
        return 2
    print(settings.describe(), file=sys.stderr)
    try:
        from tqdm import tqdm
    except ImportError:  # the eval extra is not installed: run without a bar
        tqdm = None
    bar: Any = None

    def total(count: int, done: int) -> None:
        nonlocal bar
        if tqdm is not None and not args.no_progress:
            bar = tqdm(total=count, initial=done, unit="utt", desc="eval", file=sys.stderr)

    def progress(n: int) -> None:
        if bar is not None:
            bar.update(n)

    try:
        summary = asyncio.run(run_eval(Path(args.manifest), Path(args.out), settings,
                                       language=args.language, progress=progress, total=total))
    except ManifestError as exc:
        print(f"audio-reward eval: {exc}", file=sys.stderr)
        return 2
    except ImportError as exc:
        print(f"audio-reward eval: {exc}; install the eval extra: pip install 'audio-reward[eval]'", file=sys.stderr)
        return 2
    finally:
        if bar is not None:
            bar.close()

    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f} %"

    print(f"utterances {summary['utterances']}  scored {summary['scored']}  failed {summary['failed']}")
    print(f"CER {pct(summary['cer_percent'])}  WER {pct(summary['wer_percent'])}"
          + (f"  score mean {summary['score']['mean']:.4f}" if summary["score"] else ""))
    print(f"report: {Path(args.out) / 'summary.md'}")
    return 0 if summary["failed"] == 0 else 1
