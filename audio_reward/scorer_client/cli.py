"""``audio-reward score`` and ``audio-reward eval``: the client's commands.

Only argparse is imported here; the client and its dependencies load when a
command runs.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from ..extras import install_command

DEFAULT_URL = "http://127.0.0.1:8000"
"""Where ``score`` and ``eval`` look for a scorer when neither ``--url`` nor ``AUDIO_REWARD_URL`` names one."""
EVAL_EXTRA = f"{install_command('eval')}  (from an audio-reward checkout; or: pip install matplotlib tqdm)"


def _client_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("scorer connection (defaults: AUDIO_REWARD_* variables, then built-in)")
    g.add_argument("--url", action="append", dest="urls", metavar="URL",
                   help=f"scorer base URL; repeat for several servers (default: $AUDIO_REWARD_URL, else {DEFAULT_URL})")
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
        "eval", help="evaluate a manifest of utterances: CER/WER report, plots, report.html; or compare two runs",
        description="Score every row of a JSONL manifest ({audio, text, [language], [id]}; audio paths relative "
                    "to the manifest) and write utterances.jsonl (a row as each item finishes), summary.json, "
                    "summary.md, PNG plots and a self-contained report.html. Running it again on the same --out "
                    "resumes: scored ids are skipped. With --compare RUN_A RUN_B it scores nothing: it compares two "
                    "finished runs utterance by utterance (eval_results.json, deltas.jsonl, compare.png, report.html), "
                    "refusing runs that were not scored alike.")
    ev.add_argument("manifest", metavar="MANIFEST.jsonl", nargs="?")
    ev.add_argument("--compare", nargs=2, metavar=("RUN_A", "RUN_B"),
                    help="compare two finished eval runs (their --out folders); RUN_A is the base")
    ev.add_argument("--out", required=True, metavar="DIR", help="output folder (created; reused to resume)")
    ev.add_argument("--language", help="language for rows that do not name one")
    ev.add_argument("--no-progress", action="store_true", help="no progress bar")
    _client_options(ev)
    ev.set_defaults(func=_eval)


def _settings(args: argparse.Namespace) -> Any:
    from .settings import ClientSettings

    urls = args.urls or (None if os.environ.get("AUDIO_REWARD_URL") else [DEFAULT_URL])
    return ClientSettings.from_env(
        urls, api_key=args.api_key, timeout=args.timeout, deadline=args.deadline,
        max_retries=args.max_retries, concurrency=args.concurrency, chunk_size=args.chunk_size,
    )


def _describe(command: str, settings: Any) -> str:
    """The settings a command runs with, one per line, as ``audio-reward serve`` prints its own."""
    return "\n".join(f"audio-reward {command}: {line}" for line in settings.describe().splitlines())


def _score(args: argparse.Namespace) -> int:
    import json

    from .errors import ScorerError
    from .evaluate import AudioFileError, read_audio
    from .sync_client import ScorerClient
    from .wire import ScoreItem, ScoreResult

    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"audio-reward score: {exc}", file=sys.stderr)
        return 2
    print(_describe("score", settings), file=sys.stderr)
    outcomes: dict[str, ScoreResult | ScorerError | str] = {}
    items, names = [], []
    for name in args.files:
        try:
            samples, rate = read_audio(name)
        except AudioFileError as exc:
            outcomes[name] = f"cannot read audio: {exc}"
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


def missing_eval_extras(progress: bool) -> list[str]:
    """The modules ``eval`` needs that do not import (matplotlib for plots, tqdm for the bar)."""
    missing = []
    for module in ["matplotlib"] + (["tqdm"] if progress else []):
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing


class ProgressBar:
    """The per-item progress bar: one tick per finished row, failures counted on it."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.bar, self.failed = enabled, None, 0

    def start(self, total: int, done: int) -> None:
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="utt", desc="eval", file=sys.stderr, dynamic_ncols=True)
            self.bar.set_postfix(failed=0)

    def row(self, row: dict[str, Any]) -> None:
        if row.get("status") != "ok":
            self.failed += 1
        if self.bar is not None:
            if row.get("status") != "ok":
                self.bar.set_postfix(failed=self.failed, refresh=False)
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _eval(args: argparse.Namespace) -> int:
    import asyncio
    from pathlib import Path

    if args.compare:
        return _compare(args)
    if not args.manifest:
        print("audio-reward eval: give a MANIFEST.jsonl to score, or --compare RUN_A RUN_B", file=sys.stderr)
        return 2
    missing = missing_eval_extras(not args.no_progress)
    if missing:
        print(f"audio-reward eval: {' and '.join(missing)} not installed (plots, progress bar); {EVAL_EXTRA}",
              file=sys.stderr)
        return 2

    from .errors import ScorerError
    from .evaluate import ManifestError, ScoringMismatchError, run_eval

    try:
        settings = _settings(args)
    except ValueError as exc:
        print(f"audio-reward eval: {exc}", file=sys.stderr)
        return 2
    print(_describe("eval", settings), file=sys.stderr)
    bar = ProgressBar(not args.no_progress)
    try:
        summary = asyncio.run(run_eval(Path(args.manifest), Path(args.out), settings, language=args.language,
                                       on_start=bar.start, on_row=bar.row))
    except (ManifestError, ScoringMismatchError) as exc:
        print(f"audio-reward eval: {exc}", file=sys.stderr)
        return 2
    except ScorerError as exc:
        print(f"audio-reward eval: cannot reach the scorer at {', '.join(settings.urls)}: {exc}", file=sys.stderr)
        return 2
    finally:
        bar.close()

    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f} %"

    print(f"utterances {summary['utterances']}  scored {summary['scored']}  failed {summary['failed']}"
          + (f"  (timeouts {summary['timeouts']})" if summary["timeouts"] else ""))
    print(f"CER {pct(summary['cer_percent'])}  WER {pct(summary['wer_percent'])}"
          + (f"  score mean {summary['score']['mean']:.4f}" if summary["score"] else ""))
    print(f"report: {Path(args.out) / 'summary.md'}  {Path(args.out) / 'report.html'}")
    return 0 if summary["failed"] == 0 else 1


def _short_names(folders: list[str]) -> list[str]:
    """The fewest trailing path parts that tell the folders apart: ``a/eval``, ``b/eval`` → ``a/eval``, ``b/eval``."""
    from pathlib import Path

    parts = [Path(f).resolve().parts for f in folders]
    for k in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-k:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [str(Path(f).resolve()) for f in folders]


def _compare(args: argparse.Namespace) -> int:
    from pathlib import Path

    from .compare import EVAL_RESULTS, Run, RunError, compare_runs, results_markdown
    from .evaluate import ScoringMismatchError

    if args.manifest:
        print("audio-reward eval: --compare scores nothing; give either a MANIFEST or --compare", file=sys.stderr)
        return 2
    missing = missing_eval_extras(False)
    if missing:
        print(f"audio-reward eval: {' and '.join(missing)} not installed (plots); {EVAL_EXTRA}", file=sys.stderr)
        return 2
    try:
        runs = [Run.load(Path(d), name=name) for d, name in zip(args.compare, _short_names(args.compare))]
        results = compare_runs(runs, Path(args.out))
    except (RunError, ScoringMismatchError) as exc:
        print(f"audio-reward eval --compare: {exc}", file=sys.stderr)
        return 2
    print(results_markdown(results), end="")
    print(f"results: {Path(args.out) / EVAL_RESULTS}  {Path(args.out) / 'report.html'}")
    return 0
