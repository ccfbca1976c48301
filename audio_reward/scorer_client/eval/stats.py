"""Figures of eval rows, shared by the run summary, run comparisons and the HTML report.

A row counts as scored when its ``status`` is ``"ok"``; every other row is a
failure.  Only finite numbers (not booleans, NaN or infinities) enter a mean
or a median, so one broken row cannot poison a run's figures.
"""

from __future__ import annotations

import functools
import math
import statistics
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from ...protocol.reports import CheckpointStats

Row = dict[str, Any]

HISTOGRAM_BINS = 10
"""Buckets of the score histogram in ``summary.json``."""
SIGNAL_FIELDS = ("speaker_similarity", "dnsmos_ovrl", "dnsmos_sig", "dnsmos_bak", "dnsmos_p808")
"""The per-utterance signals a server with speaker and quality models answers (docs/signals.md)."""


def number(value: Any) -> float | None:
    """``value`` as a float when it is a finite int or float (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def is_scored(row: Row) -> bool:
    """Whether the row is a scored utterance (``status`` ``"ok"``) rather than a failure."""
    return row.get("status") == "ok"


def scored_rows(rows: Sequence[Row]) -> list[Row]:
    """The scored rows, in order."""
    return [r for r in rows if is_scored(r)]


def failed_rows(rows: Sequence[Row]) -> list[Row]:
    """The rows that failed, in order."""
    return [r for r in rows if not is_scored(r)]


def scored_values(rows: Sequence[Row], key: str) -> list[float]:
    """The finite values of ``key`` over the scored rows, in order."""
    return [v for v in (number(r.get(key)) for r in rows if is_scored(r)) if v is not None]


def timeouts(failed: Sequence[Row]) -> int:
    """How many of the failed rows were a 504 or no answer in time."""
    return sum(bool((r.get("error") or {}).get("timeout")) for r in failed)


def mean(values: Sequence[float]) -> float | None:
    """The mean, or None without values."""
    # numpy's pairwise sum, not statistics.fmean's exact one: reports keep the figures they always had
    return float(np.mean(values)) if values else None


def grouped_sem(rows: Sequence[Row], key: str, group: str = "text") -> float | None:
    """Standard error of the mean of ``key``, with each ``group`` (a text) as one unit.

    Several samples of one text are not independent draws of the test set, so
    they are averaged first; the standard error is the standard deviation of
    those means over the square root of their count.  None with fewer than
    two groups.
    """
    groups: dict[Any, list[float]] = {}
    for row in rows:
        value = number(row.get(key)) if is_scored(row) else None
        if value is not None:
            groups.setdefault(row.get(group), []).append(value)
    if len(groups) < 2:
        return None
    means = [float(np.mean(v)) for v in groups.values()]
    return float(np.std(means, ddof=1) / np.sqrt(len(means)))


def median(values: Sequence[float]) -> float | None:
    """The median (the mean of the middle two for an even count), or None without values."""
    return float(statistics.median(values)) if values else None


def percent(value: float | None, scale: float = 1.0) -> str:
    """``value`` (times ``scale``: 100 for a rate) as a percentage with two decimals, ``n/a`` for None."""
    return "n/a" if value is None else f"{scale * value:.2f} %"


def failure_reason(row: Row) -> Any:
    """A failed row's reason: its error's code, else the error's type."""
    error = row.get("error") or {}
    return error.get("code") or error.get("type")


def percentage_points(value: float | None, digits: int = 2) -> str:
    """A change of a rate, signed, in percentage points: 0.007 → ``+0.70 pp`` (not "0.7 %", a relative change)."""
    figure = number(value)
    return "n/a" if figure is None else f"{100 * figure:+.{digits}f} pp"


def markdown_table(head: Sequence[str], rows: Iterable[Sequence[Any]]) -> list[str]:
    """A markdown table's lines: the header, its rule, then one line per row (cells as ``str`` gives them)."""
    return ["| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(map(str, row)) + " |" for row in rows)]


def summarize(rows: list[dict[str, Any]], *, manifest: str = "") -> dict[str, Any]:
    """Seed-TTS-eval figures: mean of per-utterance CER/WER ×100, plus the score distribution and failures.

    ``utterances`` counts every manifest row, refused ones included; it is
    the total a progress bar showed.  ``timeouts`` counts the failures that
    were a 504 or no answer in time.
    """
    failed = failed_rows(rows)
    cer, wer, ratio = (scored_values(rows, key) for key in ("cer", "wer", "duration_ratio"))

    def as_percent(rate: float | None) -> float | None:
        return None if rate is None else round(100 * rate, 4)

    return {
        "manifest": manifest, "utterances": len(rows), "scored": len(rows) - len(failed), "failed": len(failed),
        "timeouts": timeouts(failed), "cer_percent": as_percent(mean(cer)), "wer_percent": as_percent(mean(wer)),
        "cer_median_percent": as_percent(median(cer)), "cer_count": len(cer), "wer_count": len(wer),
        "duration_ratio_mean": mean(ratio), "duration_ratio_median": median(ratio),
        "score": _distribution(scored_values(rows, "score")), "signals": signal_stats(rows),
        "failures": [{"id": r.get("id"), "audio": r.get("audio"), "reason": failure_reason(r),
                      "message": (r.get("error") or {}).get("message")} for r in failed],
    }


def signal_stats(rows: Sequence[dict[str, Any]]) -> dict[str, dict[str, float | int | None]]:
    """Mean, median and count of each signal the scored rows hold (Seed-TTS-eval's SIM is the mean similarity)."""
    return {key: {"mean": mean(values), "median": median(values), "count": len(values)}
            for key in SIGNAL_FIELDS if (values := scored_values(rows, key))}


def _distribution(scores: list[float]) -> dict[str, Any] | None:
    if not scores:
        return None
    arr = np.asarray(scores)
    lo, hi = min(0.0, float(arr.min())), max(1.0, float(arr.max()))
    counts, edges = np.histogram(arr, bins=HISTOGRAM_BINS, range=(lo, hi))
    return {
        "mean": float(arr.mean()), "median": float(np.median(arr)),
        "p10": float(np.percentile(arr, 10)), "p90": float(np.percentile(arr, 90)),
        "min": float(arr.min()), "max": float(arr.max()),
        "histogram": [{"lo": round(float(a), 6), "hi": round(float(b), 6), "count": int(c)}
                      for a, b, c in zip(edges[:-1], edges[1:], counts, strict=False)],
    }


def summary_facts(summary: dict[str, Any]) -> list[tuple[str, str]]:
    """A run's figures as (label, text) rows: the table of ``summary.md`` and of ``report.html``."""
    facts = [("utterances", summary["utterances"]), ("scored", summary["scored"]), ("failed", summary["failed"]),
             ("of which timeouts (504 or no answer in time)", summary.get("timeouts", 0)),
             ("CER (mean of per-utterance, %)", percent(summary["cer_percent"])),
             ("CER (median of per-utterance, %)", percent(summary.get("cer_median_percent"))),
             ("WER (mean of per-utterance, %)", percent(summary["wer_percent"]))]
    if summary.get("duration_ratio_mean") is not None:
        facts.append(("duration ratio mean / median",
                      f"{summary['duration_ratio_mean']:.3f} / {summary['duration_ratio_median']:.3f}"))
    facts += [(f"{key} mean / median", f"{figures['mean']:.4f} / {figures['median']:.4f}")
              for key, figures in (summary.get("signals") or {}).items()]
    dist = summary.get("score")
    if dist:
        facts += [("score mean / median", f"{dist['mean']:.4f} / {dist['median']:.4f}"),
                  ("score p10 / p90", f"{dist['p10']:.4f} / {dist['p90']:.4f}")]
    return [(label, str(value)) for label, value in facts]


_pct = functools.partial(percent, scale=100)  # the runs' CER and WER are rates


def _num(v: float | None) -> str:
    return "n/a" if v is None else f"{v:.3f}"


Table = tuple[list[str], list[list[str]]]
"""A table as text: its header and its rows, rendered as markdown (:func:`markdown_table`) and in report.html."""


def checkpoint_table(checkpoints: Sequence[CheckpointStats]) -> Table:
    """Each run's own figures, a row per run."""
    head = ["run", "count", "failures", "timeouts", "CER mean", "CER median", "WER mean", "WER median",
            "duration ratio mean", "duration ratio median", "reward mean"]
    return head, [[c.name, str(c.count), str(c.failures), str(c.timeouts),
                   *map(_pct, (c.mean_cer, c.median_cer, c.mean_wer, c.median_wer)),
                   *map(_num, (c.mean_duration_ratio, c.median_duration_ratio, c.mean_reward))] for c in checkpoints]


def signal_table(checkpoints: Sequence[CheckpointStats]) -> Table | None:
    """The mean and median of each signal any run holds (:data:`~.stats.SIGNAL_FIELDS` order); None without one."""
    present = [key for key in SIGNAL_FIELDS if any(key in c.signals for c in checkpoints)]
    if not present:
        return None
    head = ["run", *(f"{key} {figure}" for key in present for figure in ("mean", "median"))]
    return head, [[c.name, *(_num(getattr(c.signals[k], figure)) if k in c.signals else "n/a"
                             for k in present for figure in ("mean", "median"))] for c in checkpoints]
