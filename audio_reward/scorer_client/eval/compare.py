"""``audio-reward eval --compare RUN_A RUN_B``: per-utterance deltas between finished eval runs.

The one implementation of "before vs after": the checkpoint evaluation of
the Qwen3-TTS recipe calls :func:`compare_runs` on its per-checkpoint runs
and writes the same ``eval_results.json``.  Runs are compared only when
their scorers scored alike (same model, normaliser, reward policy: see
:data:`~.evaluate.SCORING_KEYS`); otherwise :class:`ScoringMismatchError`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ... import __version__
from ...protocol.reports import CheckpointStats, Comparison, EvalResults, HeldOut, SignalStats, UtteranceDelta
from .evaluate import (
    SCORER_JSON,
    SUMMARY_JSON,
    UTTERANCES,
    load_rows,
    require_scored_alike,
    scoring_identity,
)
from .recordings import RunAudio
from .report import write_compare_report
from .stats import (
    checkpoint_table,
    failed_rows,
    grouped_sem,
    is_scored,
    markdown_table,
    mean,
    median,
    number,
    percent,
    percentage_points,
    scored_values,
    signal_stats,
    signal_table,
    timeouts,
)

EVAL_RESULTS = "eval_results.json"
DELTAS = "deltas.jsonl"


class RunError(ValueError):
    """A folder that is not a finished ``audio-reward eval`` run."""


@dataclass
class Run:
    """A finished ``audio-reward eval`` output folder, its rows in manifest order."""

    name: str
    directory: Path
    rows: list[dict[str, Any]]
    info: dict[str, Any]
    audio: RunAudio
    """Where the run's recordings are, each checked against the hash recorded when it was scored."""
    path: str = ""

    @classmethod
    def load(cls, directory: Path, name: str | None = None, path: str | None = None) -> Run:
        summary_path, info_path = directory / SUMMARY_JSON, directory / SCORER_JSON
        if not directory.is_dir():
            raise RunError(f"{directory} does not exist (give the --out folder of an `audio-reward eval` run)")
        for needed in (summary_path, info_path, directory / UTTERANCES):
            if not needed.is_file():
                raise RunError(f"{directory} is not a finished `audio-reward eval` run: {needed.name} is missing")
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
        latest = load_rows(directory / UTTERANCES)
        ids = summary.get("ids")
        if not isinstance(ids, list):
            raise RunError(f"{summary_path} has no list of ids: rerun `audio-reward eval` on it to finish the run")
        missing = [i for i in ids if i not in latest]
        if missing:
            raise RunError(f"{directory}: {len(missing)} id(s) of summary.json have no row, e.g. {missing[0]!r}")
        name = name or directory.name
        return cls(name, directory, [latest[i] for i in ids], json.loads(info_path.read_text(encoding="utf-8")),
                   RunAudio.of_run(name, directory, summary), path or str(directory))


def run_stats(run: Run) -> CheckpointStats:
    """Count, failures, mean/median CER, WER and duration ratio, mean reward and the signals, from the run's rows."""
    failed = failed_rows(run.rows)
    cer, wer, ratio = (scored_values(run.rows, key) for key in ("cer", "wer", "duration_ratio"))
    return CheckpointStats(
        name=run.name, path=run.path, run_dir=str(run.directory), count=len(run.rows),
        scored=len(run.rows) - len(failed), failures=len(failed), timeouts=timeouts(failed),
        mean_cer=mean(cer), sem_cer=grouped_sem(run.rows, "cer"), median_cer=median(cer), mean_wer=mean(wer),
        median_wer=median(wer), mean_duration_ratio=mean(ratio), median_duration_ratio=median(ratio),
        mean_reward=mean(scored_values(run.rows, "score")),
        signals={key: SignalStats.model_validate(figures) for key, figures in signal_stats(run.rows).items()},
    )


def _utterance_delta(b: dict[str, Any], row: dict[str, Any]) -> UtteranceDelta:
    """One utterance scored by the base (``b``) and by the other checkpoint (``row``)."""
    values: dict[str, float | None] = {}
    for key in ("cer", "wer", "score", "duration_ratio"):
        values[f"base_{key}"] = base = number(b.get(key)) if is_scored(b) else None
        values[key] = value = number(row.get(key)) if is_scored(row) else None
        if key != "duration_ratio":
            values[f"delta_{key}"] = None if base is None or value is None else value - base
    return UtteranceDelta(
        id=row["id"], text=str(row.get("text") or b.get("text") or ""),
        base_status="ok" if is_scored(b) else "error",
        status="ok" if is_scored(row) else "error",
        **values,
    )


def compare_pair(base: Run, other: Run) -> Comparison:
    """``other`` against ``base``, utterance by utterance (paired by id, in ``other``'s order)."""
    base_rows = {r["id"]: r for r in base.rows}
    other_ids = {r["id"] for r in other.rows}
    deltas = [_utterance_delta(base_rows[row["id"]], row) for row in other.rows if row["id"] in base_rows]
    # How many utterances the checkpoint said better, worse or the same, and the mean and median deltas.
    d_cer = [d.delta_cer for d in deltas if d.delta_cer is not None]
    return Comparison(
        base=base.name, checkpoint=other.name, paired=len(deltas),
        improved=sum(d < 0 for d in d_cer), worse=sum(d > 0 for d in d_cer), unchanged=sum(d == 0 for d in d_cer),
        failed_either=sum(d.status != "ok" or d.base_status != "ok" for d in deltas),
        mean_delta_cer=mean(d_cer), median_delta_cer=median(d_cer),
        mean_delta_wer=mean([d.delta_wer for d in deltas if d.delta_wer is not None]),
        mean_delta_score=mean([d.delta_score for d in deltas if d.delta_score is not None]),
        only_in_base=[r["id"] for r in base.rows if r["id"] not in other_ids],
        only_in_checkpoint=[r["id"] for r in other.rows if r["id"] not in base_rows],
        utterances=deltas,
    )


def compare_runs(runs: Sequence[Run], out_dir: Path, *, held_out: HeldOut | None = None,
                 synthesis: dict[str, Any] | None = None) -> EvalResults:
    """Compare every run with the first; write ``eval_results.json``, ``deltas.jsonl``, the plot and the report."""
    if len(runs) < 2:
        raise RunError("compare needs a base run and at least one more")
    names = [r.name for r in runs]
    if len(set(names)) != len(names):
        raise RunError(f"run names must differ, got {names}")
    for run in runs[1:]:
        require_scored_alike(runs[0].info, run.info, f"{runs[0].name} and {run.name} were not scored alike, so their "
                             "CER cannot be compared: ", ". Score both with the same scorer settings.")
    out_dir.mkdir(parents=True, exist_ok=True)
    results = EvalResults(
        created_by=f"audio-reward {__version__}", base=runs[0].name, checkpoints=[run_stats(r) for r in runs],
        comparisons=[compare_pair(runs[0], r) for r in runs[1:]], scoring=scoring_identity(runs[0].info),
        scorer=runs[0].info, held_out=held_out, synthesis=synthesis,
    )
    with (out_dir / DELTAS).open("w", encoding="utf-8") as f:
        f.writelines(json.dumps({"checkpoint": comp.checkpoint, **d.model_dump()}, ensure_ascii=False) + "\n"
                     for comp in results.comparisons for d in comp.utterances)
    results.plots = [DELTAS]
    results.plots += write_compare_report(results, [(r.name, r.rows) for r in runs], out_dir,
                                          {r.name: r.audio for r in runs})
    (out_dir / EVAL_RESULTS).write_text(results.model_dump_json(indent=2) + "\n", encoding="utf-8")
    return results


def comparison_lines(results: EvalResults) -> list[str]:
    """Each comparison in a line: the paired counts, the CER of the paired rows on each side and its change.

    When the runs hold different utterances their own means (the table) are not comparable, so the line
    says how many rows each side had and how many are on one side only.
    """
    rows = {c.name: c.count for c in results.checkpoints}
    lines = []
    for comp in results.comparisons:
        both = [(u.base_cer, u.cer) for u in comp.utterances if u.base_cer is not None and u.cer is not None]
        paired_means = (f"paired mean CER {percent(mean([a for a, _ in both]), 100)} → "
                        f"{percent(mean([b for _, b in both]), 100)}, "
                        if both else "")
        lines.append(f"{comp.checkpoint} vs {comp.base}: {comp.paired} paired ({comp.base} has {rows[comp.base]} "
                     f"rows, {comp.checkpoint} {rows[comp.checkpoint]}), {comp.improved} better, {comp.worse} worse, "
                     f"{comp.unchanged} equal, {comp.failed_either} failed on a side; {paired_means}"
                     f"mean CER change {percentage_points(comp.mean_delta_cer)}")
        if comp.only_in_base or comp.only_in_checkpoint:
            lines.append(f"  not paired: {len(comp.only_in_base)} only in {comp.base}, {len(comp.only_in_checkpoint)} "
                         f"only in {comp.checkpoint}; the table's means are over each run's own rows, so compare "
                         "the paired figures above")
    return lines


def results_markdown(results: EvalResults) -> str:
    """Each comparison in a few lines (the paired figures first), then the runs side by side, for a terminal
    or summary.md."""
    lines = [*comparison_lines(results), "", *markdown_table(*checkpoint_table(results.checkpoints))]
    signals = signal_table(results.checkpoints)
    if signals:
        lines += ["", *markdown_table(*signals)]
    return "\n".join(lines) + "\n"
