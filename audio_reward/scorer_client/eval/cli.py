"""``audio-reward eval``: score a manifest and report, or compare two finished runs.

Only argparse and pydantic are imported here; the client, numpy and matplotlib load when
the command runs.
"""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from types import MappingProxyType
from typing import Any

from ...cli import SIGINT_STATUS
from ...extras import install_command, missing_modules
from ..cli import add_client_options, command_settings, failure_line

EVAL_EXTRA = f"{install_command('eval')}  (from an audio-reward checkout; or: pip install matplotlib tqdm)"


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    add_client_options(ev)
    ev.set_defaults(func=_eval)


EVAL_MODULES = MappingProxyType({"matplotlib": "plots", "tqdm": "progress bar"})
"""What each module of the eval extra draws."""


class ProgressBar(contextlib.AbstractContextManager["ProgressBar"]):
    """The per-item progress bar: one tick per finished row, failures counted on it; closed when its block ends."""

    def __init__(self, enabled: bool) -> None:
        self.enabled, self.failed = enabled, 0
        self.bar: Any = None  # a tqdm bar once started
        self.total: int | None = None  # the manifest's rows, once the run has started

    def start(self, total: int, done: int) -> None:
        self.total = total
        if self.enabled:
            from tqdm import tqdm

            self.bar = tqdm(total=total, initial=done, unit="utt", desc="eval", file=sys.stderr, dynamic_ncols=True)
            self.bar.set_postfix(failed=0)

    def row(self, row: dict[str, Any]) -> None:
        failed = row.get("status") != "ok"
        self.failed += failed
        if self.bar is not None:
            if failed:
                self.bar.set_postfix(failed=self.failed, refresh=False)
            self.bar.update(1)

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def _eval(args: argparse.Namespace) -> int:
    import asyncio

    progress = not (args.no_progress or args.compare)  # --compare draws no bar
    missing = missing_modules(m for m in EVAL_MODULES if progress or m != "tqdm")
    if missing:
        uses = ", ".join(EVAL_MODULES[m] for m in missing)
        print(f"audio-reward eval: {' and '.join(missing)} not installed ({uses}); {EVAL_EXTRA}", file=sys.stderr)
        return 2
    if args.compare:
        return _compare(args)
    if not args.manifest:
        print("audio-reward eval: give a MANIFEST.jsonl to score, or --compare RUN_A RUN_B", file=sys.stderr)
        return 2

    from ..errors import ScorerError
    from .evaluate import ManifestError, ScoringMismatchError, run_eval
    from .stats import percent

    settings = command_settings("eval", args)
    if settings is None:
        return 2
    try:
        with ProgressBar(not args.no_progress) as bar:
            summary = asyncio.run(run_eval(Path(args.manifest), Path(args.out), settings, language=args.language,
                                           on_start=bar.start, on_row=bar.row))
    except (ManifestError, ScoringMismatchError) as exc:
        print(f"audio-reward eval: {exc}", file=sys.stderr)
        return 2
    except ScorerError as exc:
        print(failure_line("eval", settings, exc), file=sys.stderr)
        return 2
    except KeyboardInterrupt:  # the bar is closed by now, so the line stands on its own
        print(interrupted_line(Path(args.out), bar.total), file=sys.stderr)
        return SIGINT_STATUS

    print(f"utterances {summary['utterances']}  scored {summary['scored']}  failed {summary['failed']}"
          + (f"  (timeouts {summary['timeouts']})" if summary["timeouts"] else ""))
    print(f"CER {percent(summary['cer_percent'])}  WER {percent(summary['wer_percent'])}"
          + (f"  score mean {summary['score']['mean']:.4f}" if summary["score"] else ""))
    print(f"report: {Path(args.out) / 'summary.md'}  {Path(args.out) / 'report.html'}")
    return 0 if summary["failed"] == 0 else 1


def interrupted_line(out: Path, total: int | None) -> str:
    """The one line ``eval`` prints on Ctrl-C: the rows kept and that running it again resumes.

    Every row is written whole and flushed the moment its utterance finishes, so what is in
    ``utterances.jsonl`` is kept; asyncio's traceback through the client would say none of that.
    """
    from .evaluate import UTTERANCES, load_rows

    path = out / UTTERANCES
    if total is None or not path.is_file():
        return ("audio-reward eval: interrupted before scoring began (rows of an earlier run are kept); run the "
                "same command again to start")
    scored = sum(row.get("status") == "ok" for row in load_rows(path).values())
    return (f"audio-reward eval: interrupted; {scored} of {total} utterances scored are kept in {path}; "
            "run the same command again to resume (scored ones are skipped)")


def _short_names(folders: list[str]) -> list[str]:
    """The fewest trailing path parts that tell the folders apart: ``a/eval``, ``b/eval`` → ``a/eval``, ``b/eval``."""
    parts = [Path(f).resolve().parts for f in folders]
    for k in range(1, max(len(p) for p in parts) + 1):
        names = ["/".join(p[-k:]) for p in parts]
        if len(set(names)) == len(names):
            return names
    return [str(Path(f).resolve()) for f in folders]


def _compare(args: argparse.Namespace) -> int:
    from .compare import EVAL_RESULTS, Run, RunError, compare_runs, results_markdown
    from .evaluate import ScoringMismatchError

    if args.manifest:
        print("audio-reward eval: --compare scores nothing; give either a MANIFEST or --compare", file=sys.stderr)
        return 2
    try:
        runs = [Run.load(Path(d), name=name) for d, name in zip(args.compare, _short_names(args.compare), strict=False)]
        results = compare_runs(runs, Path(args.out))
    except (RunError, ScoringMismatchError) as exc:
        print(f"audio-reward eval --compare: {exc}", file=sys.stderr)
        return 2
    print(results_markdown(results), end="")
    print(f"results: {Path(args.out) / EVAL_RESULTS}  {Path(args.out) / 'report.html'}")
    problems = [p for run in runs for p in run.audio.problems]
    if problems:
        print(f"audio-reward eval --compare: {len(problems)} recording(s) not shown in report.html (each is named "
              f"there), e.g. {problems[0]}", file=sys.stderr)
    return 0
