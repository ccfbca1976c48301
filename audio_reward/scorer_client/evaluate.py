"""``audio-reward eval``: score a manifest of utterances and report like Seed-TTS-eval.

Per-utterance rows go to ``utterances.jsonl`` as they finish (one line each,
flushed), so an interrupted run resumes where it stopped: ids already scored
are skipped, failed ones are tried again.  The report is built from the
last row of every id.
"""

from __future__ import annotations

import asyncio
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import numpy as np

from .async_client import AsyncScorerClient
from .errors import ScorerError
from .settings import ClientSettings
from .wire import ScoreItem, ScoreResult

UTTERANCES = "utterances.jsonl"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"
CER_PLOT = "cer_histogram.png"
DURATION_PLOT = "score_vs_duration.png"
HISTOGRAM_BINS = 10


class ManifestError(ValueError):
    """The manifest itself cannot be read (not a bad row: those become failures)."""


@dataclass(frozen=True)
class Utterance:
    id: str
    audio: str
    text: str
    language: str | None
    path: Path


@dataclass
class ManifestRows:
    good: list[Utterance] = field(default_factory=list)
    bad: list[dict[str, Any]] = field(default_factory=list)


def read_manifest(manifest: Path) -> ManifestRows:
    """Parse a JSONL manifest; rows that cannot be used become failure rows with a reason."""
    if not manifest.is_file():
        raise ManifestError(f"manifest {manifest} does not exist")
    rows = ManifestRows()
    seen: set[str] = set()
    root = manifest.resolve().parent
    with manifest.open(encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"line {number}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as exc:
                rows.bad.append(_failure(where, None, "bad_manifest_row", f"{where} is not JSON: {exc}"))
                continue
            if not isinstance(obj, dict):
                rows.bad.append(_failure(where, None, "bad_manifest_row", f"{where} is not a JSON object"))
                continue
            audio, text, language = obj.get("audio"), obj.get("text"), obj.get("language")
            uid = obj.get("id", audio)
            uid = str(uid) if isinstance(uid, (str, int)) and not isinstance(uid, bool) else None
            problem = None
            if not isinstance(audio, str) or not audio:
                problem = "'audio' must be a path string"
            elif not isinstance(text, str):
                problem = "'text' must be a string"
            elif language is not None and not isinstance(language, str):
                problem = "'language' must be a string"
            elif uid is None:
                problem = "'id' must be a string or an integer"
            elif uid in seen:
                problem = f"id {uid!r} appears twice in the manifest"
            if problem:
                # A duplicate keeps its line as id, so it cannot shadow the row it repeats.
                bad_id = where if uid is None or uid in seen else uid
                rows.bad.append(_failure(bad_id, audio if isinstance(audio, str) else None,
                                         "bad_manifest_row", f"{where}: {problem}"))
                continue
            assert uid is not None and isinstance(audio, str) and isinstance(text, str)
            seen.add(uid)
            rows.good.append(Utterance(uid, audio, text, language, root / audio))
    return rows


def _failure(uid: str, audio: str | None, code: str, message: str, kind: str = "ManifestError") -> dict[str, Any]:
    return {"id": uid, "audio": audio, "status": "error", "error": {"type": kind, "code": code, "message": message}}


def load_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The last row of every id in a per-utterance JSONL file, dropping a torn last line."""
    latest: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return latest
    with path.open("rb") as f:
        data = f.read()
    good_end = data.rfind(b"\n") + 1
    if good_end < len(data):
        # An interrupted write left half a line: cut it so appends start on a fresh line.
        with path.open("r+b") as f:
            f.truncate(good_end)
    for line in data[:good_end].splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict) and isinstance(row.get("id"), str):
            latest[row["id"]] = row
    return latest


def read_audio(path: Path) -> tuple[np.ndarray, int]:
    """Mono float32 samples and the sample rate of a WAV/FLAC (or any libsndfile) file."""
    import soundfile as sf

    data, rate = sf.read(str(path), dtype="float32", always_2d=True)
    mono = data[:, 0] if data.shape[1] == 1 else data.mean(axis=1, dtype=np.float32)
    return np.ascontiguousarray(mono), int(rate)


def _row(utt: Utterance, outcome: ScoreResult | ScorerError, duration_s: float | None) -> dict[str, Any]:
    row: dict[str, Any] = {"id": utt.id, "audio": utt.audio, "text": utt.text, "language": utt.language}
    if isinstance(outcome, ScoreResult):
        row.update(status="ok", score=outcome.score, request_id=outcome.request_id)
        row.update({k: v for k, v in outcome.diagnostics.items() if k not in row})
        row["duration_s"] = duration_s
    else:
        error: dict[str, Any] = {"type": type(outcome).__name__, "message": str(outcome)}
        code = getattr(outcome, "code", None)
        if code is not None:
            error["code"] = code
        cause = getattr(outcome, "last_cause", None)
        if cause is not None:
            error["last_cause"] = repr(cause)
        row.update(status="error", error=error, request_id=outcome.request_id)
    return row


def _blocks(items: list[Utterance], size: int) -> Iterator[list[Utterance]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def run_eval(
    manifest: Path,
    out_dir: Path,
    settings: ClientSettings,
    *,
    language: str | None = None,
    progress: Callable[[int], None] | None = None,
    total: Callable[[int, int], None] | None = None,
) -> dict[str, Any]:
    """Score every utterance not yet scored in ``out_dir``, then write the report; returns the summary."""
    rows = read_manifest(manifest)
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / UTTERANCES
    done = {uid for uid, row in load_rows(path).items() if row.get("status") == "ok"}
    todo = [u for u in rows.good if u.id not in done]
    if total is not None:
        total(len(rows.good), len(rows.good) - len(todo))
    block = settings.chunk_size * settings.concurrency * 2
    with path.open("a", encoding="utf-8") as sink:
        for bad in rows.bad:
            sink.write(json.dumps(bad, ensure_ascii=False) + "\n")
        async with AsyncScorerClient(settings=settings) as client:
            for part in _blocks(todo, block):
                loaded = await asyncio.gather(*(asyncio.to_thread(_load, u) for u in part))
                items = [ScoreItem(a[0], a[1], u.text, language=u.language or language)
                         for u, a in zip(part, loaded) if not isinstance(a, _LoadFailure)]
                scored = iter(await client.score_many(items) if items else [])
                for utt, audio in zip(part, loaded):
                    if isinstance(audio, _LoadFailure):
                        row = _failure(utt.id, utt.audio, audio.code, audio.message, "AudioFileError")
                    else:
                        row = _row(utt, next(scored), audio[0].shape[0] / audio[1])
                    sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                sink.flush()
                os.fsync(sink.fileno())
                if progress is not None:
                    progress(len(part))
    latest = load_rows(path)
    wanted = [u.id for u in rows.good] + [b["id"] for b in rows.bad]
    final = [latest[uid] for uid in dict.fromkeys(wanted) if uid in latest]
    summary = summarize(final, manifest=str(manifest))
    summary["plots"] = write_plots(final, out_dir)
    (out_dir / SUMMARY_JSON).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / SUMMARY_MD).write_text(summary_markdown(summary), encoding="utf-8")
    return summary


@dataclass(frozen=True)
class _LoadFailure:
    code: str
    message: str


def _load(utt: Utterance) -> tuple[np.ndarray, int] | _LoadFailure:
    if not utt.path.is_file():
        return _LoadFailure("audio_not_found", f"audio file {utt.path} does not exist")
    try:
        return read_audio(utt.path)
    except Exception as exc:  # soundfile raises LibsndfileError, RuntimeError, TypeError…
        return _LoadFailure("audio_unreadable", f"audio file {utt.path} is unreadable: {exc}")


def _finite(values: list[Any]) -> list[float]:
    return [float(v) for v in values if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)]


def summarize(rows: list[dict[str, Any]], *, manifest: str = "") -> dict[str, Any]:
    """Seed-TTS-eval figures: mean of per-utterance CER/WER ×100, plus the score distribution and failures."""
    ok = [r for r in rows if r.get("status") == "ok"]
    failed = [r for r in rows if r.get("status") != "ok"]
    cer, wer, scores = _finite([r.get("cer") for r in ok]), _finite([r.get("wer") for r in ok]), _finite([r.get("score") for r in ok])
    summary: dict[str, Any] = {
        "manifest": manifest,
        "utterances": len(rows),
        "scored": len(ok),
        "failed": len(failed),
        "cer_percent": round(100 * float(np.mean(cer)), 4) if cer else None,
        "wer_percent": round(100 * float(np.mean(wer)), 4) if wer else None,
        "cer_count": len(cer),
        "wer_count": len(wer),
        "score": _distribution(scores),
        "failures": [
            {"id": r.get("id"), "audio": r.get("audio"), "reason": (r.get("error") or {}).get("code")
             or (r.get("error") or {}).get("type"), "message": (r.get("error") or {}).get("message")}
            for r in failed
        ],
    }
    return summary


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
                      for a, b, c in zip(edges[:-1], edges[1:], counts)],
    }


def summary_markdown(summary: dict[str, Any]) -> str:
    def pct(v: float | None) -> str:
        return "n/a" if v is None else f"{v:.2f} %"

    lines = [
        "# Evaluation summary", "",
        f"Manifest: `{summary['manifest']}`", "",
        "| | |", "|---|---|",
        f"| utterances | {summary['utterances']} |",
        f"| scored | {summary['scored']} |",
        f"| failed | {summary['failed']} |",
        f"| CER (mean of per-utterance, %) | {pct(summary['cer_percent'])} |",
        f"| WER (mean of per-utterance, %) | {pct(summary['wer_percent'])} |",
    ]
    dist = summary.get("score")
    if dist:
        lines += [f"| score mean / median | {dist['mean']:.4f} / {dist['median']:.4f} |",
                  f"| score p10 / p90 | {dist['p10']:.4f} / {dist['p90']:.4f} |",
                  "", "## Score histogram", "", "| from | to | count |", "|---|---|---|"]
        lines += [f"| {b['lo']:.2f} | {b['hi']:.2f} | {b['count']} |" for b in dist["histogram"]]
    if summary["failures"]:
        lines += ["", "## Failures", "", "| id | reason | message |", "|---|---|---|"]
        lines += [f"| {f['id']} | {f['reason']} | {str(f['message']).replace('|', '/')[:200]} |"
                  for f in summary["failures"]]
    if summary.get("plots"):
        lines += ["", "## Plots", ""] + [f"![{p}]({p})" for p in summary["plots"]]
    return "\n".join(lines) + "\n"


def write_plots(rows: list[dict[str, Any]], out_dir: Path) -> list[str]:
    """CER histogram and score-vs-duration scatter as PNGs (matplotlib, Agg); returns the file names."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ok = [r for r in rows if r.get("status") == "ok"]
    written = []
    cer = _finite([r.get("cer") for r in ok])
    if cer:
        fig, ax = plt.subplots(figsize=(6, 4))
        # CER can exceed 100 % (insertions); such utterances land in the last bin.
        ax.hist(np.clip(np.asarray(cer) * 100, 0, 100), bins=20, range=(0, 100), color="#3b7dd8")
        ax.set_xlabel("CER per utterance (%, clipped at 100)")
        ax.set_ylabel("utterances")
        ax.set_title(f"CER histogram (mean {100 * np.mean(cer):.2f} %, n={len(cer)})")
        fig.tight_layout()
        fig.savefig(out_dir / CER_PLOT, dpi=100)
        plt.close(fig)
        written.append(CER_PLOT)
    pairs = [(r["duration_s"], r["score"]) for r in ok
             if _finite([r.get("duration_s")]) and _finite([r.get("score")])]
    if pairs:
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.scatter([p[0] for p in pairs], [p[1] for p in pairs], s=10, alpha=0.6, color="#d8613b")
        ax.set_xlabel("duration (s)")
        ax.set_ylabel("score")
        ax.set_title("Score vs duration")
        fig.tight_layout()
        fig.savefig(out_dir / DURATION_PLOT, dpi=100)
        plt.close(fig)
        written.append(DURATION_PLOT)
    return written
