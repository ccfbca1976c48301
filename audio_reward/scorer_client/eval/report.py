"""Plots and the self-contained ``report.html`` of ``audio-reward eval`` and ``eval --compare``.

Everything here needs matplotlib (the ``eval`` extra); ``eval`` checks for it
before its first request.  Plots are PNG files beside the rows; the HTML
report embeds them and the worst utterances' audio as ``data:`` URIs, so the
one file opens offline, mailed or copied anywhere.
"""

from __future__ import annotations

import base64
import html
import itertools
import math
import textwrap
from collections.abc import Iterable, Sequence
from pathlib import Path
from types import MappingProxyType
from typing import Any

import numpy as np

from ...protocol.reports import EvalResults
from ...settings_flags import dotted_items
from . import stats
from .recordings import RunAudio
from .stats import failed_rows, is_scored, number, percentage_points, scored_rows, scored_values

CER_PLOT = "cer_histogram.png"
DURATION_PLOT = "score_vs_duration.png"
CER_BY_DURATION_PLOT = "cer_by_duration.png"
COMPARE_PLOT = "compare.png"
REPORT_HTML = "report.html"
WORST_ROWS = 10
CER_BIN_PERCENT = 5
"""Histogram bins of 5 CER points from 0 to 100 %; CER above 100 % (insertions) lands in the last bin."""
DURATION_BUCKETS = (0.0, 2.0, 4.0, 6.0, 10.0, 20.0, math.inf)
AUDIO_TYPES = MappingProxyType({".wav": "audio/wav", ".flac": "audio/flac", ".ogg": "audio/ogg", ".mp3": "audio/mpeg"})
MAX_EMBEDDED_AUDIO_BYTES = 8 << 20
"""Audio above this is linked rather than embedded, so a report of long utterances stays openable."""
FAILED_COLOR = "#c62828"
FAILED_AT = 116
"""Where the plots draw failures, beyond the 0–100 % CER axis: far enough from 100 that the "100" and "failed"
tick labels of a compare panel stay apart."""
FAILED_BAND = 5
"""Half the width of the failure band around :data:`FAILED_AT`."""
COLORS = ("#1f5fbf", "#e07b00", "#2e7d32", "#7b1fa2", "#00838f", "#6d4c41")
PERCENT_TICKS = (0, 20, 40, 60, 80, 100)
TITLE_CHARS = 44
"""Titles and axis labels of a compare panel wrap at this many characters, so long run names stay in their panel."""


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({"figure.dpi": 100, "axes.grid": True, "grid.alpha": 0.3})
    return plt


def _integer_counts(ax: Any) -> None:
    from matplotlib.ticker import MaxNLocator

    ax.yaxis.set_major_locator(MaxNLocator(integer=True))


def _cer_percent(rows: Sequence[dict[str, Any]]) -> np.ndarray:
    return np.asarray([100 * c for c in scored_values(rows, "cer")])


def _cer_histogram(ax: Any, cer: np.ndarray, failed: int, *, color: str, label: str | None = None,
                   step: bool = False, slot: int = 0, slots: int = 1, failed_band: bool | None = None) -> None:
    """Integer counts per 5-point CER bin, bar edges, the mean as a dashed line and failures as a red bar.

    The failure bars of several runs on one axis share the band right of 100 %, side by side (``slot`` of
    ``slots``); ``failed_band`` (default: this run has failures) keeps room for it.
    """
    edges = np.arange(0, 100 + CER_BIN_PERCENT, CER_BIN_PERCENT)
    counts, _ = np.histogram(np.clip(cer, 0, 100), bins=edges)
    name = f"{label}: " if label else ""
    if step:
        ax.stairs(counts, edges, color=color, linewidth=2, label=f"{name}n={cer.size}")
    else:
        ax.bar(edges[:-1], counts, width=CER_BIN_PERCENT, align="edge", color=color, edgecolor="black",
               linewidth=0.6, label=f"{name}n={cer.size}")
    if cer.size:
        mean = float(cer.mean())
        ax.axvline(mean, color=color if step else COLORS[1], linestyle="--", linewidth=1.5,
                   label=f"{name}mean {mean:.2f} %")
    if failed:
        width = 2 * FAILED_BAND / slots
        ax.bar(FAILED_AT - FAILED_BAND + slot * width, failed, width=width, align="edge", color=FAILED_COLOR,
               edgecolor=color, linewidth=2 if step else 0.6, label=f"{name}failed {failed}")
    if failed_band if failed_band is not None else failed:
        ax.set_xlim(0, FAILED_AT + FAILED_BAND + 1)
        ax.set_xticks([*PERCENT_TICKS, FAILED_AT], [*map(str, PERCENT_TICKS), "failed"])
    else:
        ax.set_xlim(0, 100)
    _integer_counts(ax)
    ax.set_xlabel("CER per utterance (%, clipped at 100)")
    ax.set_ylabel("utterances")


def _save(plt: Any, fig: Any, path: Path) -> None:
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def _cer_plot(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    ok, failed = scored_rows(rows), failed_rows(rows)
    _cer_histogram(ax, _cer_percent(rows), len(failed), color=COLORS[0])
    ax.set_title(f"CER per utterance (n={len(rows)}: {len(ok)} scored, {len(failed)} failed)")
    ax.legend(loc="upper right", fontsize=8)


def _number_pairs(rows: Sequence[dict[str, Any]], x: str, y: str) -> list[tuple[float, float]]:
    """(``x``, ``y``) of each row that holds both as numbers."""
    return [(a, b) for a, b in ((number(r.get(x)), number(r.get(y))) for r in rows) if a is not None and b is not None]


def _duration_plot(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    """Score against audio duration; failed utterances with a duration drawn on a band below 0."""
    failed = failed_rows(rows)
    points = _number_pairs(scored_rows(rows), "duration_s", "score")
    lost = [d for d in (number(r.get("duration_s")) for r in failed) if d is not None]
    if points:
        ax.scatter([p[0] for p in points], [p[1] for p in points], s=28, alpha=0.75, color=COLORS[0],
                   edgecolors="black", linewidths=0.4, label=f"scored ({len(points)})")
    if lost:
        ax.scatter(lost, [-0.05] * len(lost), s=40, marker="x", color=FAILED_COLOR,
                   label=f"failed ({len(lost)}), drawn at -0.05")
    unplaced = len(failed) - len(lost)
    scores = [p[1] for p in points]
    ax.set_ylim(min([-0.1, *scores]) - 0.02, max([1.0, *scores]) + 0.05)
    ax.set_xlabel("audio duration (s)")
    ax.set_ylabel("score")
    ax.set_title(f"Score vs duration (n={len(points) + len(lost)}"
                 + (f"; {unplaced} failed without audio not shown" if unplaced else "") + ")")
    if points or lost:
        ax.legend(loc="best", fontsize=8)


def _cer_by_duration_plot(ax: Any, rows: Sequence[dict[str, Any]]) -> None:
    failed = failed_rows(rows)
    pairs = [(d, 100 * c) for d, c in _number_pairs(scored_rows(rows), "duration_s", "cer")]
    # The CERs of each DURATION_BUCKETS bucket that holds an utterance, by the bucket's label.
    buckets = {f"{lo:g}–{hi:g} s" if math.isfinite(hi) else f"≥ {lo:g} s": inside
               for lo, hi in itertools.pairwise(DURATION_BUCKETS) if (inside := [c for d, c in pairs if lo <= d < hi])}
    means = [float(np.mean(cers)) for cers in buckets.values()]
    if buckets:
        bars = ax.bar(list(buckets), means, color=COLORS[0], edgecolor="black", linewidth=0.6)
        ax.bar_label(bars, [f"n={len(cers)}" for cers in buckets.values()], padding=2, fontsize=8)
        overall = float(np.mean([c for _, c in pairs]))
        ax.axhline(overall, color=COLORS[1], linestyle="--", linewidth=1.5, label=f"mean {overall:.2f} %")
        ax.legend(loc="upper right", fontsize=8)
        ax.set_ylim(0, max(max(means) * 1.2, 1.0))
    ax.set_xlabel("audio duration bucket")
    ax.set_ylabel("mean CER (%)")
    ax.set_title(f"CER by duration (n={len(pairs)} scored" + (f", {len(failed)} failed not shown)" if failed else ")"))


def run_plots(rows: Sequence[dict[str, Any]], out_dir: Path) -> list[str]:
    """The CER histogram, score vs duration and CER by duration bucket of one run, as PNGs; returns the names."""
    plt = _pyplot()
    plots = {CER_PLOT: _cer_plot, DURATION_PLOT: _duration_plot, CER_BY_DURATION_PLOT: _cer_by_duration_plot}
    for name, draw in plots.items():
        fig, ax = plt.subplots(figsize=(7, 4.2))
        draw(ax, rows)
        _save(plt, fig, out_dir / name)
    return list(plots)


def _wrapped(text: str) -> str:
    return textwrap.fill(text, TITLE_CHARS, break_on_hyphens=False)


PLOTTED_SIGNALS = MappingProxyType({"speaker_similarity": ("speaker similarity (cosine)", -1.0, 1.0, 0.1),
                                    "dnsmos_ovrl": ("DNSMOS overall (MOS)", 1.0, 5.0, 0.2)})
"""The signals a compare plot shows beside the CER when the runs hold them: axis label, range and bin width."""


def _signal_panel(ax: Any, runs: Sequence[tuple[str, Sequence[dict[str, Any]]]], key: str) -> None:
    """Every run's distribution of one signal, each with its mean as a dashed line."""
    label, lo, hi, width = PLOTTED_SIGNALS[key]
    edges = np.arange(lo, hi + width / 2, width)
    for (name, rows), color in zip(runs, COLORS * 4, strict=False):
        values = np.asarray(scored_values(rows, key))
        if not values.size:
            continue
        counts, _ = np.histogram(np.clip(values, lo, hi), bins=edges)
        ax.stairs(counts, edges, color=color, linewidth=2, label=f"{name}: n={values.size}")
        ax.axvline(float(values.mean()), color=color, linestyle="--", linewidth=1.5,
                   label=f"{name}: mean {values.mean():.3f}")
    _integer_counts(ax)
    ax.set_xlim(lo, hi)
    ax.set_xlabel(f"{label} per utterance")
    ax.set_ylabel("utterances")
    ax.set_title(_wrapped(f"{label} distribution"), fontsize=11)
    ax.legend(loc="upper left", fontsize=7)


def _paired_cer(base_rows: Sequence[dict[str, Any]], rows: Sequence[dict[str, Any]]
                ) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
    """(base, other) CER of the utterances scored on both sides, and of those failed on a side (at FAILED_AT)."""
    def cer(row: dict[str, Any]) -> float | None:
        value = number(row.get("cer")) if is_scored(row) else None
        return None if value is None else min(100 * value, 100)

    base = {r["id"]: r for r in base_rows}
    pairs = [(cer(base[r["id"]]), cer(r)) for r in rows if r["id"] in base]
    scored = [(x, y) for x, y in pairs if x is not None and y is not None]
    failed = [(FAILED_AT if x is None else x, FAILED_AT if y is None else y)
              for x, y in pairs if x is None or y is None]
    return scored, failed


def _pair_panel(ax: Any, base_name: str, base_rows: Sequence[dict[str, Any]], name: str,
                rows: Sequence[dict[str, Any]], color: str) -> None:
    """One later run's per-utterance CER against the first run's, with the diagonal and the failed band."""
    scored, failed = _paired_cer(base_rows, rows)
    better = sum(y < x for x, y in scored)
    worse = sum(y > x for x, y in scored)
    ax.plot([0, 100], [0, 100], color="gray", linewidth=1, linestyle=":", label="no change")
    ax.scatter([x for x, _ in scored], [y for _, y in scored], s=30, alpha=0.75, color=color, edgecolors="black",
               linewidths=0.4, label=f"better {better}, worse {worse}, equal {len(scored) - better - worse}")
    if failed:
        ax.scatter([x for x, _ in failed], [y for _, y in failed], s=45, marker="x", color=FAILED_COLOR,
                   label=f"failed on a side ({len(failed)})")
    ticks, labels = [*PERCENT_TICKS, FAILED_AT], [*map(str, PERCENT_TICKS), "failed"]
    for span, limits, set_ticks in ((ax.axvspan, ax.set_xlim, ax.set_xticks), (ax.axhspan, ax.set_ylim, ax.set_yticks)):
        span(FAILED_AT - FAILED_BAND - 1, FAILED_AT + FAILED_BAND + 1, color=FAILED_COLOR, alpha=0.07)
        limits(-3, FAILED_AT + FAILED_BAND + 1)
        set_ticks(ticks, labels)
    ax.set_aspect("equal")
    ax.set_xlabel(_wrapped(f"CER {base_name} (%, clipped at 100)"))
    ax.set_ylabel(_wrapped(f"CER {name} (%)"))
    ax.set_title(_wrapped(f"{name} vs {base_name} (n={len(scored) + len(failed)} paired)"), fontsize=11)
    ax.legend(loc="upper left", fontsize=7)


def _distribution_panel(dist: Any, runs: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> None:
    any_failed = any(not is_scored(r) for _, rows in runs for r in rows)
    for slot, ((name, rows), color) in enumerate(zip(runs, COLORS * 4, strict=False)):
        _cer_histogram(dist, _cer_percent(rows), len(failed_rows(rows)), color=color, label=name, step=True,
                       slot=slot, slots=len(runs), failed_band=any_failed)
    dist.set_title(_wrapped("CER distribution (n=" + ", ".join(f"{name} {len(rows)}" for name, rows in runs) + ")"),
                   fontsize=11)
    dist.legend(loc="upper right", fontsize=7)


def compare_figure(runs: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> Any:
    """Per-utterance CER of each later run against the first (scatter, diagonal) and every run's CER distribution.

    Utterances paired by id; one failed on either side is drawn on the
    red "failed" band right of 100 %, so a failure never hides as a good score.
    When the runs hold speaker similarity or DNSMOS (docs/signals.md), each gets
    its own distribution panel beside the CER's.  Returns the laid-out matplotlib figure.
    """
    plt = _pyplot()
    (base_name, base_rows), others = runs[0], runs[1:]
    signals = [key for key in PLOTTED_SIGNALS if any(scored_values(rows, key) for _, rows in runs)]
    panels = len(others) + 1 + len(signals)
    fig, axes = plt.subplots(1, panels, figsize=(5.2 * panels, 4.8), squeeze=False)
    for ax, (name, rows), color in zip(axes[0], others, COLORS[1:] * 4, strict=False):
        _pair_panel(ax, base_name, base_rows, name, rows, color)
    _distribution_panel(axes[0][len(others)], runs)
    for ax, key in zip(axes[0][len(others) + 1:], signals, strict=True):
        _signal_panel(ax, runs, key)
    fig.tight_layout()
    return fig


def _data_uri(path: Path, mime: str) -> str:
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"


def _audio_cell(row: dict[str, Any], audio: RunAudio) -> str:
    found = audio.recording(row)
    if isinstance(found, str):
        return f'<span class=failed>{html.escape(found)}</span>' if found else ""
    mime = AUDIO_TYPES.get(found.suffix.lower())
    name = html.escape(str(row.get("audio")))
    if mime is None:
        return name
    if found.stat().st_size > MAX_EMBEDDED_AUDIO_BYTES:
        return f'<a href="{html.escape(found.as_uri())}">{name}</a> (too large to embed)'
    # "metadata": the player shows the clip's length before it is played.
    return f'<audio controls preload="metadata" src="{_data_uri(found, mime)}"></audio>'


def _fmt(value: Any, percent: bool = False) -> str:
    figure = number(value)
    if figure is None:
        return "" if value is None else html.escape(str(value))
    return f"{100 * figure:.1f} %" if percent else f"{figure:.3f}"


def as_text(value: Any) -> str:
    """A setting's value as a reader writes it: ``not set`` for None, ``yes``/``no``, lists comma-separated."""
    if value is None:
        return "not set"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:g}"
    if isinstance(value, (list, tuple)):
        return ", ".join(as_text(v) for v in value) if value else "none"
    return str(value)


def worst_rows(rows: Sequence[dict[str, Any]], limit: int = WORST_ROWS) -> list[dict[str, Any]]:
    """The scored utterances with the highest CER (then lowest score), worst first."""
    ok = [r for r in scored_rows(rows) if number(r.get("cer")) is not None]
    return sorted(ok, key=lambda r: (-float(r["cer"]), number(r.get("score")) or 0.0))[:limit]


_STYLE = """body{font-family:system-ui,sans-serif;margin:2em;max-width:1200px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #bbb;padding:4px 8px;vertical-align:top}
th{background:#eee}td.num{text-align:right;white-space:nowrap}img{max-width:100%;border:1px solid #ddd}
.failed{color:#c62828}audio{width:220px}"""


def _page(title: str, body: list[str]) -> str:
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f"<title>{html.escape(title)}</title><style>{_STYLE}</style></head><body>\n"
            + "\n".join(body) + "\n</body></html>\n")


def _table(pairs: Iterable[tuple[str, Any]]) -> str:
    """Rows of a label and its value, :func:`as_text`: nested settings (``dotted_items``) read as a table of
    settings (``reward.formula``), not as Python reprs."""
    cells = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(as_text(v))}</td></tr>" for k, v in pairs)
    return f"<table>{cells}</table>"


def _html_table(head: Sequence[str], rows: Iterable[str]) -> str:
    """A table under the header ``head`` (escaped here); each of ``rows`` is a rendered ``<tr>``."""
    return "<table><tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in head) + "</tr>" + "".join(rows) + "</table>"


def _images(out_dir: Path, names: Sequence[str]) -> list[str]:
    return [f'<p><img alt="{html.escape(n)}" src="{_data_uri(out_dir / n, "image/png")}"></p>' for n in names]


def _utterance_table(rows: Sequence[dict[str, Any]], audio: RunAudio) -> str:
    return _html_table(["id", "CER", "WER", "score", "duration (s)", "text", "transcript", "audio"], (
        f"<tr><td>{html.escape(str(r.get('id')))}</td><td class=num>{_fmt(r.get('cer'), True)}</td>"
        f"<td class=num>{_fmt(r.get('wer'), True)}</td><td class=num>{_fmt(r.get('score'))}</td>"
        f"<td class=num>{_fmt(r.get('duration_s'))}</td><td>{html.escape(str(r.get('text') or ''))}</td>"
        f"<td>{html.escape(str(r.get('transcript') or ''))}</td><td>{_audio_cell(r, audio)}</td></tr>"
        for r in rows))


def _failure_table(rows: Sequence[dict[str, Any]]) -> str:
    failed = failed_rows(rows)
    if not failed:
        return "<p>None.</p>"
    return _html_table(["id", "reason", "message"], (
        f"<tr class=failed><td>{html.escape(str(r.get('id')))}</td>"
        f"<td>{html.escape(str(stats.failure_reason(r)))}"
        f"{' (timeout)' if (r.get('error') or {}).get('timeout') else ''}</td>"
        f"<td>{html.escape(str((r.get('error') or {}).get('message') or ''))}</td></tr>" for r in failed))


def _not_shown(audio: Sequence[RunAudio]) -> list[str]:
    """A section naming every recording a table could not show as its run's own (empty when there is none)."""
    problems = [p for a in audio for p in a.problems]
    if not problems:
        return []
    items = "".join(f"<li>{html.escape(p)}</li>" for p in problems)
    return [f"<h2 class=failed>Recordings not shown ({len(problems)})</h2>",
            "<p>These files are missing or are not the files the run scored (their content hash differs), so no "
            f"other file is played in their place.</p><ul class=failed>{items}</ul>"]


def write_run_report(rows: Sequence[dict[str, Any]], summary: dict[str, Any], out_dir: Path,
                     audio: RunAudio) -> list[str]:
    """Write the run's plots and ``report.html``; returns the file names written."""
    plots = run_plots(rows, out_dir)
    facts = [("manifest", summary.get("manifest", "")), *stats.summary_facts(summary)]
    scorer = summary.get("scorer") or {}
    worst = _utterance_table(worst_rows(rows), audio)
    body = ["<h1>Evaluation report</h1>", _table(facts), *_not_shown([audio]), "<h2>Scorer</h2>",
            _table(dotted_items(scorer)), "<h2>Plots</h2>", *_images(out_dir, plots),
            f"<h2>Worst {WORST_ROWS} utterances by CER</h2>", worst, "<h2>Failures</h2>", _failure_table(rows)]
    (out_dir / REPORT_HTML).write_text(_page("Evaluation report", body), encoding="utf-8")
    return [*plots, REPORT_HTML]


def _text_table(table: stats.Table) -> str:
    """A table of text as HTML, every column after the first (the run) a number."""
    head, rows = table
    return _html_table(head, (f"<tr><td>{html.escape(row[0])}</td>"
                              + "".join(f"<td class=num>{html.escape(v)}</td>" for v in row[1:]) + "</tr>"
                              for row in rows))


def write_compare_report(results: EvalResults, runs: Sequence[tuple[str, Sequence[dict[str, Any]]]],
                         out_dir: Path, audio: dict[str, RunAudio]) -> list[str]:
    """Write the before/after plot and ``report.html`` of a comparison; returns the file names written."""
    _save(_pyplot(), compare_figure(runs), out_dir / COMPARE_PLOT)
    signals = stats.signal_table(results.checkpoints)
    body = ["<h1>Before / after</h1>", _text_table(stats.checkpoint_table(results.checkpoints)),
            *(["<h2>Speaker similarity and speech quality</h2>", _text_table(signals)] if signals else []),
            *_images(out_dir, [COMPARE_PLOT])]
    by_id = {name: {r["id"]: r for r in rows} for name, rows in runs}
    for comp in results.comparisons:
        body.append(f"<h2>{html.escape(comp.checkpoint)} vs {html.escape(comp.base)}</h2>")
        body.append(_table([("paired utterances", comp.paired), ("better (lower CER)", comp.improved),
                            ("worse", comp.worse), ("equal", comp.unchanged),
                            ("mean CER change (percentage points)", percentage_points(comp.mean_delta_cer)),
                            ("only in base", len(comp.only_in_base)),
                            ("only in checkpoint", len(comp.only_in_checkpoint))]))
        # Increases only: an utterance whose CER fell is an improvement, not a candidate for this table.
        worst = sorted((d for d in comp.utterances if d.delta_cer is not None and d.delta_cer > 0),
                       key=lambda d: -(d.delta_cer or 0))[:WORST_ROWS]
        base_rows, rows = by_id[comp.base], by_id[comp.checkpoint]
        head = ["id", f"CER {comp.base}", f"CER {comp.checkpoint}", "CER change", "text",
                f"{comp.base}: transcript, audio", f"{comp.checkpoint}: transcript, audio"]
        cells = (
            f"<tr><td>{html.escape(d.id)}</td><td class=num>{_fmt(d.base_cer, True)}</td>"
            f"<td class=num>{_fmt(d.cer, True)}</td><td class=num>{percentage_points(d.delta_cer, 1)}</td>"
            f"<td>{html.escape(d.text)}</td>"
            f"<td>{html.escape(str(base_rows[d.id].get('transcript') or ''))}<br>"
            f"{_audio_cell(base_rows[d.id], audio[comp.base])}</td>"
            f"<td>{html.escape(str(rows[d.id].get('transcript') or ''))}<br>"
            f"{_audio_cell(rows[d.id], audio[comp.checkpoint])}</td></tr>" for d in worst)
        body.append("<h3>Largest CER increases</h3>")
        body.append(_html_table(head, cells) if worst else "<p>No paired utterance's CER rose.</p>")
    body[2:2] = _not_shown(list(audio.values()))  # after the table of runs, where it is seen first
    body += ["<h2>Scorer</h2>", _table(dotted_items(results.scoring))]
    (out_dir / REPORT_HTML).write_text(_page("Before / after", body), encoding="utf-8")
    return [COMPARE_PLOT, REPORT_HTML]
