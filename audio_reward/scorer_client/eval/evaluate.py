"""``audio-reward eval``: score a manifest of utterances and report like Seed-TTS-eval.

Per-utterance rows go to ``utterances.jsonl`` as they finish (one line each,
flushed), so an interrupted run resumes where it stopped: ids already scored
are skipped, failed ones are tried again.  The report is built from the
last row of every id.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..async_client import AsyncScorerClient
from ..audio_file import AudioFileError, read_audio
from ..errors import DeadlineExceededError, ScorerError
from ..settings import ClientSettings
from ..wire import ScoreItem, ScoreResult
from .recordings import HASH_KEY, RunAudio, audio_location, file_sha256
from .stats import markdown_table, summarize, summary_facts

UTTERANCES = "utterances.jsonl"
SUMMARY_JSON = "summary.json"
SUMMARY_MD = "summary.md"


class ManifestError(ValueError):
    """The manifest itself cannot be read (not a bad row: those become failures)."""


@dataclass(frozen=True)
class Utterance:
    id: str
    audio: str
    text: str
    language: str | None
    path: Path
    speaker_reference: Path | None = None
    """The row's reference recording of the voice (its ``speaker_reference`` path): Seed-TTS-eval's SIM."""


@dataclass
class ManifestRows:
    good: list[Utterance] = field(default_factory=list)
    bad: list[dict[str, Any]] = field(default_factory=list)


def _row_problem(obj: dict[str, Any], uid: str | None, seen: set[str]) -> str | None:
    """Why a manifest row cannot be scored; None when it can."""
    audio, text, language = obj.get("audio"), obj.get("text"), obj.get("language")
    if not isinstance(audio, str) or not audio:
        return "'audio' must be a path string"
    if not isinstance(text, str):
        return "'text' must be a string"
    if language is not None and not isinstance(language, str):
        return "'language' must be a string"
    if uid is None:
        return "'id' must be a string or an integer"
    if uid in seen:
        return f"id {uid!r} appears twice in the manifest"
    if obj.get("speaker_reference") is not None and not isinstance(obj.get("speaker_reference"), str):
        return "'speaker_reference' must be a path string"
    return None


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
                not_object = None if isinstance(obj, dict) else f"{where} is not a JSON object"
            except json.JSONDecodeError as exc:
                not_object = f"{where} is not JSON: {exc}"
            if not_object:
                rows.bad.append(_failure(where, None, "bad_manifest_row", not_object))
                continue
            raw_id = obj.get("id", obj.get("audio"))
            uid = str(raw_id) if isinstance(raw_id, (str, int)) and not isinstance(raw_id, bool) else None
            audio = obj.get("audio")
            problem = _row_problem(obj, uid, seen)
            if problem:
                # A duplicate keeps its line as id, so it cannot shadow the row it repeats.
                bad_id = where if uid is None or uid in seen else uid
                seen.add(bad_id)  # a later row with this id is a duplicate: every id is counted once
                rows.bad.append(_failure(bad_id, audio if isinstance(audio, str) else None,
                                         "bad_manifest_row", f"{where}: {problem}"))
                continue
            assert uid is not None and isinstance(audio, str)
            seen.add(uid)
            reference = obj.get("speaker_reference")
            rows.good.append(Utterance(uid, audio, str(obj["text"]), obj.get("language"), root / audio,
                                       root / reference if reference else None))
    return rows


def _failure(uid: str, audio: str | None, code: str, message: str, kind: str = "ManifestError") -> dict[str, Any]:
    return {"id": uid, "audio": audio, "status": "error", "error": {"type": kind, "code": code, "message": message}}


def load_rows(path: Path) -> dict[str, dict[str, Any]]:
    """The last row of every id in a per-utterance JSONL file, dropping a torn last line."""
    latest: dict[str, dict[str, Any]] = {}
    if not path.exists():
        return latest
    data = path.read_bytes()
    good_end = data.rfind(b"\n") + 1
    if good_end < len(data):
        # An interrupted write left half a line: cut it so appends start on a fresh line.
        with path.open("r+b") as f:
            f.truncate(good_end)
    for line in data[:good_end].splitlines():
        with contextlib.suppress(json.JSONDecodeError):  # a line that is not JSON is skipped
            row = json.loads(line)
            if isinstance(row, dict) and isinstance(row.get("id"), str):
                latest[row["id"]] = row
    return latest


def _compact(path: Path, final: list[dict[str, Any]], latest: dict[str, dict[str, Any]]) -> None:
    """Where ``utterances.jsonl`` holds an id twice, rewrite it with one row per id: the manifest's, in its
    order, then any other id's.

    A resumed run appends the rows it scores again (so an interruption loses nothing already written);
    once it has finished, the earlier rows of those ids are dropped, so the file holds what the summary
    counts.  A first run's file, one row per id in the order they finished, is left as it is.  Written
    beside it and renamed over it: an interruption here leaves the old file whole.
    """
    if path.read_bytes().count(b"\n") == len(latest):
        return
    kept = {row["id"] for row in final}
    rows = [*final, *(row for uid, row in latest.items() if uid not in kept)]
    tmp = path.with_name(path.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def _error_fields(outcome: ScorerError) -> dict[str, Any]:
    """The row's ``error``: type, message, code and HTTP status of the (last) fault, and whether it was a timeout."""
    error: dict[str, Any] = {"type": type(outcome).__name__, "message": str(outcome)}
    cause = getattr(outcome, "last_cause", None)
    code = getattr(outcome, "code", None) or getattr(cause, "code", None)
    status = getattr(outcome, "status", None) or getattr(cause, "status", None)
    found = {"code": code, "status": status, "last_cause": None if cause is None else repr(cause)}
    error.update({key: value for key, value in found.items() if value is not None})
    error["timeout"] = bool(status == 504 or code == "timeout" or isinstance(outcome, DeadlineExceededError)
                            or isinstance(cause, asyncio.TimeoutError))
    return error


def _row(utt: Utterance, outcome: ScoreResult | ScorerError, audio: _Loaded) -> dict[str, Any]:
    row: dict[str, Any] = {"id": utt.id, "audio": utt.audio, HASH_KEY: audio.sha256, "text": utt.text,
                           "language": utt.language}
    if isinstance(outcome, ScoreResult):
        row.update(status="ok", score=outcome.score, request_id=outcome.request_id)
        row.update({k: v for k, v in outcome.diagnostics.items() if k not in row})
    else:
        row.update(status="error", error=_error_fields(outcome), request_id=outcome.request_id)
    row["duration_s"] = audio.samples.shape[0] / audio.rate
    return row


SCORER_JSON = "scorer.json"
SCORING_KEYS = ("protocol_version", "engine.name", "engine.model_id", "engine.weights_sha256", "engine.compute_type",
                "engine.beam_size", "preset", "normalizer", "default_language", "reward")
"""The ``GET /v1/info`` fields that decide a score: two runs are comparable when these are equal."""


def scoring_identity(info: dict[str, Any]) -> dict[str, Any]:
    """The part of a server's ``/v1/info`` that decides the scores (model, normaliser, reward policy…)."""
    out: dict[str, Any] = {}
    for key in SCORING_KEYS:
        node: Any = info
        for part in key.split("."):
            node = node.get(part) if isinstance(node, dict) else None
        out[key] = node
    return out


class ScoringMismatchError(ValueError):
    """Two sets of scores were not scored alike (different model, normaliser or reward)."""


def require_scored_alike(a: dict[str, Any], b: dict[str, Any], before: str, after: str = "") -> None:
    """:class:`ScoringMismatchError` when two ``/v1/info`` answers differ in a field that decides a score.

    Its message is ``before``, then ``key: A != B`` for every such field (joined by ``; ``), then ``after``.
    """
    ia, ib = scoring_identity(a), scoring_identity(b)
    diff = [f"{k}: {json.dumps(ia[k], sort_keys=True)} != {json.dumps(ib[k], sort_keys=True)}"
            for k in SCORING_KEYS if ia[k] != ib[k]]
    if diff:
        raise ScoringMismatchError(before + "; ".join(diff) + after)


async def scorer_info(client: AsyncScorerClient) -> dict[str, Any]:
    """``/v1/info`` of the scorer(s); several URLs must all score alike."""
    infos = [await client.info(url) for url in client.settings.urls]
    for url, other in zip(client.settings.urls[1:], infos[1:], strict=False):
        require_scored_alike(infos[0], other, f"{client.settings.urls[0]} and {url} do not score alike: ")
    return infos[0]


def measures_quality(info: dict[str, Any]) -> bool:
    """Whether the scorer of this ``/v1/info`` has a quality model: an evaluation then asks for DNSMOS on every row."""
    signals = info.get("signals")
    return isinstance(signals, dict) and signals.get("quality") is not None


def _save_scorer(out_dir: Path, info: dict[str, Any], *, resumed: bool) -> None:
    """Write the scorer's ``/v1/info`` as ``scorer.json``; a resumed run refuses one that scores differently."""
    saved = out_dir / SCORER_JSON
    if saved.is_file() and resumed:
        require_scored_alike(json.loads(saved.read_text(encoding="utf-8")), info,
                             f"{out_dir} was scored by a scorer that scores differently (",
                             "); resume with the same scorer settings, or write to a new --out folder")
    saved.write_text(json.dumps(info, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


async def run_eval(manifest: Path, out_dir: Path, settings: ClientSettings, *, language: str | None = None,
                   on_start: Callable[[int, int], None] | None = None,
                   on_row: Callable[[dict[str, Any]], None] | None = None, plots: bool = True) -> dict[str, Any]:
    """Score every utterance not yet scored in ``out_dir``, then write the report; returns the summary.

    Each utterance goes out as its own request, ``concurrency × chunk_size``
    in flight (the server batches them), and its row is appended to
    ``utterances.jsonl`` the moment it finishes.  ``on_start(total, done)``
    is called once before the first request, ``on_row(row)``
    after every row written (manifest rows that cannot be used included), so
    a progress bar counts exactly the items the summary counts.  A resumed
    run refuses a scorer that scores differently from the one it started
    with (:class:`ScoringMismatchError`).
    """
    rows = read_manifest(manifest)
    path = out_dir / UTTERANCES
    async with AsyncScorerClient(settings=settings) as client:
        info = await scorer_info(client)
        # The folder is made once the scorer has answered: an unreachable scorer leaves no empty --out behind.
        await asyncio.to_thread(out_dir.mkdir, parents=True, exist_ok=True)
        done = {uid for uid, row in load_rows(path).items() if row.get("status") == "ok"}
        todo = [u for u in rows.good if u.id not in done]
        _save_scorer(out_dir, info, resumed=bool(done))
        if on_start is not None:
            on_start(len(rows.good) + len(rows.bad), len(rows.good) - len(todo))
        with path.open("a", encoding="utf-8") as sink:
            def write(row: dict[str, Any]) -> None:
                sink.write(json.dumps(row, ensure_ascii=False) + "\n")
                sink.flush()
                if on_row is not None:
                    on_row(row)

            for bad in rows.bad:
                write(bad)
            pending = iter(todo)
            references: dict[Path, str | _LoadFailure] = {}
            quality = measures_quality(info)

            async def _reference(utt: Utterance) -> str | _LoadFailure:
                """The row's reference recording, registered once per run (rows often share a speaker)."""
                path = utt.speaker_reference
                assert path is not None
                if path not in references:
                    if not path.exists():
                        references[path] = _LoadFailure("audio_not_found", f"speaker_reference {path} does not exist")
                    else:
                        try:
                            references[path] = await client.register_speaker_file(path)
                        except ScorerError as exc:
                            references[path] = _LoadFailure(str(getattr(exc, "code", "speaker_reference_unreadable")),
                                                            f"speaker_reference {path}: {exc}")
                return references[path]

            async def worker() -> None:
                # One shared iterator: asyncio never switches tasks inside next(), so no item is taken twice.
                for utt in pending:
                    audio = await asyncio.to_thread(_load, utt)
                    if isinstance(audio, _LoadFailure):
                        write(_failure(utt.id, utt.audio, audio.code, audio.message, "AudioFileError"))
                        continue
                    speaker = await _reference(utt) if utt.speaker_reference is not None else None
                    if isinstance(speaker, _LoadFailure):
                        write(_failure(utt.id, utt.audio, speaker.code, speaker.message, "SpeakerReferenceError"))
                        continue
                    item = ScoreItem(audio.samples, audio.rate, utt.text, language=utt.language or language,
                                     speaker_reference_id=speaker, measure_quality=quality)
                    outcome = (await client.score_many([item]))[0]
                    write(_row(utt, outcome, audio))

            workers = max(1, min(len(todo), settings.concurrency * settings.chunk_size))
            await asyncio.gather(*(worker() for _ in range(workers)))
            os.fsync(sink.fileno())
    latest = load_rows(path)
    wanted = [u.id for u in rows.good] + [b["id"] for b in rows.bad]
    final = [latest[uid] for uid in dict.fromkeys(wanted) if uid in latest]
    await asyncio.to_thread(_compact, path, final, latest)
    manifest_path = await asyncio.to_thread(manifest.resolve)
    summary = summarize(final, manifest=str(manifest_path))
    summary.update(audio_location(manifest_path.parent, out_dir))
    summary["ids"] = [r["id"] for r in final]
    summary["scorer"] = scoring_identity(info)
    if plots:
        from .report import write_run_report

        summary["plots"] = write_run_report(final, summary, out_dir, RunAudio("this run", (manifest_path.parent,)))
    (out_dir / SUMMARY_JSON).write_text(json.dumps(summary, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    (out_dir / SUMMARY_MD).write_text(summary_markdown(summary), encoding="utf-8")
    return summary


@dataclass(frozen=True)
class _LoadFailure:
    code: str
    message: str


@dataclass(frozen=True)
class _Loaded:
    samples: np.ndarray
    rate: int
    sha256: str
    """Of the file as scored: a report shows the file only while it still has this content."""


def _load(utt: Utterance) -> _Loaded | _LoadFailure:
    if not utt.path.exists():
        return _LoadFailure("audio_not_found", f"audio file {utt.path} does not exist")
    try:
        return _Loaded(*read_audio(utt.path), file_sha256(utt.path))
    except AudioFileError as exc:
        return _LoadFailure("audio_unreadable", f"audio file {exc}")
    except OSError as exc:
        return _LoadFailure("audio_unreadable", f"audio file {utt.path} cannot be read: {exc.strerror or exc}")


def summary_markdown(summary: dict[str, Any]) -> str:
    """``summary.md``: the run's figures, its score histogram, its failures and its plots."""
    lines = ["# Evaluation summary", "", f"Manifest: `{summary['manifest']}`", "",
             *markdown_table(["", ""], summary_facts(summary))]
    dist = summary.get("score")
    if dist:
        lines += ["", "## Score histogram", "", *markdown_table(
            ["from", "to", "count"], ([f"{b['lo']:.2f}", f"{b['hi']:.2f}", b["count"]] for b in dist["histogram"]))]
    if summary["failures"]:
        lines += ["", "## Failures", "", *markdown_table(
            ["id", "reason", "message"],
            ([f["id"], f["reason"], str(f["message"]).replace("|", "/")[:200]] for f in summary["failures"]))]
    if summary.get("plots"):
        lines += ["", "## Plots", "", "All plots and the worst utterances with audio: [report.html](report.html)", ""]
        lines += [f"![{p}]({p})" for p in summary["plots"] if p.endswith(".png")]
    return "\n".join(lines) + "\n"
