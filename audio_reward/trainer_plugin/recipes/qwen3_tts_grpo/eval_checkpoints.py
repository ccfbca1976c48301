"""Before/after evaluation of Qwen3-TTS checkpoints on held-out sentences: one command after training.

    python -m audio_reward.trainer_plugin.recipes.qwen3_tts_grpo.eval_checkpoints \\
        --val data/qwen3_tts/val.parquet --train data/qwen3_tts/train.parquet \\
        --spk-embed voice.json --tts-language Auto --url http://scorer:8000 --out eval/ \\
        base=/models/Qwen3-TTS-12Hz-0.6B-Base step500=exports/step500

(``exports/step500``: the run's checkpoint as ``audio-reward export-checkpoint
.../checkpoints/global_step_500 --base /models/Qwen3-TTS-12Hz-0.6B-Base --out
exports/step500`` writes it; see :mod:`audio_reward.trainer_plugin.checkpoint_export`.)

The first ``NAME=MODEL_DIR`` is the base; every later one is compared with
it.  Before any model is loaded it checks, printing one line per failure and
exiting 1: every model folder (local, safetensors readable, speaker encoder
present; a talker-only training export is recognised and spliced into the
base), the speaker embedding (verl-omni's JSON float list, as wide as the
talker's speaker slot), that no validation id or normalised text is in the
training parquet (``--allow-overlap`` to check deliberately), the scorer.

Then each checkpoint synthesises every validation text as the run's rollout
does (Base task, x-vector-only voice clone from the run's speaker embedding,
the run's ``tts_language``, non-streaming) and decodes as it does: codec-0
sampled with the recipe's rollout temperature, top-p and top-k, at most the
recipe's ``data.max_response_length`` frames, repetition penalty 1 (both
read from ``recipes/overrides.py``, so they cannot drift apart).  Each text is
sampled ``--samples`` times (default 4), each sample under its own fixed
seed, so reruns agree and a before/after difference comes with its spread:
``eval_results.json`` holds each checkpoint's ``sem_cer``.  ``--greedy``
decodes one greedy sample per text instead (the published evaluations'
setting; greedy decoding of a codec LM tends to loop, a regime the policy
was not trained in).  ``audio-reward eval`` scores the WAVs, and ``eval --compare``'s
implementation writes ``eval_results.json``, ``compare.png`` and
``report.html`` under ``--out``.  Against a scorer with speaker and quality
models (``--speaker-model``, ``--quality-model``) every utterance also gets
DNSMOS and its speaker similarity to the run's reference recording
(``--speaker-reference``, else each row's ``extra_info.speaker_reference_path``),
and ``eval_results.json`` their means and medians.  Synthesis and scoring resume where a
previous run into the same ``--out`` stopped.  Run it in the TTS-model
environment (qwen-tts; its transformers pin differs from verl's).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from ....settings_flags import one_line
from ...model_folder import (
    FolderKind,
    ModelFolder,
    full_tts_problems,
    inspect_folder,
    speaker_width,
)
from ...samples import SPEAKER_REFERENCE_KEY
from ...tts_speaker import read_speaker_embedding
from .._parquet import normalize_text
from ..overrides import TTS_MAX_FRAMES, TTS_SAMPLING

DEFAULT_LANGUAGE = "Auto"
"""verl-omni's Qwen3-TTS RL trains with ``tts_language=Auto`` only (``require_auto_language``)."""
SYNTH_DIR, EVAL_DIR, SPLICED_DIR = "audio", "eval", "spliced"


REPETITION_PENALTY = 1.0
"""What verl's agent loop sends with every rollout (``experimental/agent_loop/agent_loop.py``)."""
DEFAULT_SAMPLES = 4
DECODING_JSON = "decoding.json"


@dataclass(frozen=True)
class Decoding:
    """How each checkpoint decodes: the TTS recipe's rollout sampling by default, or greedy."""

    greedy: bool = False
    temperature: float = TTS_SAMPLING.temperature
    top_p: float = TTS_SAMPLING.top_p
    top_k: int = TTS_SAMPLING.top_k
    max_new_tokens: int = TTS_MAX_FRAMES
    samples: int = DEFAULT_SAMPLES
    seed: int = 0

    def generate_kwargs(self) -> dict[str, Any]:
        """qwen-tts ``generate_voice_clone`` keywords; the code predictor keeps the model's generation_config."""
        common = {"max_new_tokens": self.max_new_tokens, "repetition_penalty": REPETITION_PENALTY}
        if self.greedy:
            return {"do_sample": False, "subtalker_dosample": False, **common}
        # verl's top_k=-1 (vLLM: off) is Hugging Face's top_k=0
        return {"do_sample": True, "temperature": self.temperature, "top_p": self.top_p, "top_k": max(self.top_k, 0),
                **common}

    def sample_seed(self, row_id: str, k: int) -> int:
        """The seed of sample ``k`` of a text: fixed by (seed, id, k), so order and resuming change nothing."""
        return zlib.crc32(f"{self.seed}:{row_id}:{k}".encode())

    def record(self) -> dict[str, Any]:
        """What ``eval_results.json`` records under ``synthesis``."""
        if self.greedy:
            return {"decoding": "greedy", "max_new_tokens": self.max_new_tokens, "samples": 1,
                    "repetition_penalty": REPETITION_PENALTY}
        return {"decoding": "sampling (the recipe's rollout settings)", "temperature": self.temperature,
                "top_p": self.top_p, "top_k": self.top_k, "max_new_tokens": self.max_new_tokens,
                "repetition_penalty": REPETITION_PENALTY, "samples": self.samples, "seed": self.seed,
                "subtalker": "the model's generation_config"}


class InputsInvalid(Exception):
    """One or more checks of the evaluation's inputs failed; ``lines`` holds one sentence each."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


@dataclass(frozen=True)
class Keyed:
    """An evaluation row as the held-out check sees it: its id and the text a leak would repeat."""

    id: str
    text: str


@dataclass(frozen=True)
class EvalRow(Keyed):
    language: str | None = None
    """The row's ``extra_info.language`` (prepare_data writes one), sent to the scorer for this utterance."""
    speaker_reference: str | None = None
    """The row's reference recording of the voice (``extra_info.speaker_reference_path``, which prepare_data's
    ``--speaker-reference`` writes): the scorer measures each utterance's speaker similarity against it."""


@dataclass
class Checkpoint:
    name: str
    spec: str
    folder: ModelFolder
    load_dir: Path | None = None
    """The folder to load: the checkpoint itself, or its splice into the base."""


def parquet_rows(path: Path) -> list[dict[str, Any]]:
    """Every row of a parquet file, as dicts."""
    import pyarrow.parquet as pq

    return pq.read_table(path).to_pylist()


def row_id_and_text(row: dict[str, Any], position: int) -> tuple[str, str]:
    """A row's id (``extra_info.id`` as verl-omni writes it, else our ``extra_info.index``) and target text."""
    extra = row.get("extra_info") or {}
    text = (row.get("reward_model") or {}).get("ground_truth") or extra.get("text")
    if not isinstance(text, str) or not text.strip():
        raise ValueError(f"row {position} has no reward_model.ground_truth text")
    return str(extra.get("id", extra.get("index", position))), text


def validation_rows(path: Path, limit: int | None) -> list[EvalRow]:
    rows = [EvalRow(*row_id_and_text(r, i), language=(r.get("extra_info") or {}).get("language"),
                    speaker_reference=(r.get("extra_info") or {}).get(SPEAKER_REFERENCE_KEY))
            for i, r in enumerate(parquet_rows(path))]
    seen: dict[str, str] = {}
    for row in rows:
        name = _safe(row.id)
        if name in seen:  # each id names a WAV file: an id given twice, or two ids naming the same one
            raise ValueError(f"{path}: id {row.id!r} appears twice" if seen[name] == row.id else
                             f"{path}: ids {seen[name]!r} and {row.id!r} name the same file {name}.wav")
        seen[name] = row.id
    return rows[:limit] if limit else rows


RowKey = Callable[[dict[str, Any], int], tuple[str, str]]
"""A parquet row (and its position) → its id and the text compared after :func:`normalize_text`."""


def overlap(eval_rows: Sequence[Keyed], train_files: Sequence[Path],
            row_key: RowKey = row_id_and_text) -> tuple[list[str], list[str]]:
    """Evaluation ids found among the training ids, and evaluation texts whose normalised form was trained on."""
    keys = [row_key(row, i) for path in train_files for i, row in enumerate(parquet_rows(path))]
    train_ids = {rid for rid, _ in keys}
    train_texts = {normalize_text(text) for _, text in keys}
    return ([r.id for r in eval_rows if r.id in train_ids],
            [r.text for r in eval_rows if normalize_text(r.text) in train_texts])


Row = TypeVar("Row")


def read_validation(read: Callable[[Path, int | None], list[Row]], val: Path,
                    limit: int | None) -> tuple[list[Row], list[str]]:
    """``read(val, limit)``'s rows, and the line saying why there are none."""
    try:
        rows = read(val, limit)
    except (OSError, ValueError) as exc:
        return [], [f"validation parquet {val}: {exc}"]
    return rows, [] if rows else [f"{val} holds no rows"]


def check_held_out(rows: Sequence[Keyed], val: Path, train: Sequence[Path], allow_overlap: bool,
                   row_key: RowKey = row_id_and_text) -> tuple[dict[str, Any], list[str]]:
    """The held-out check: the ``HeldOut`` record's fields (empty when it could not run) and one line per failure.

    Overlap by id or by normalised text is a failure unless ``allow_overlap``.
    """
    failures = [f"training parquet {path} does not exist" for path in train if not path.is_file()]
    held: dict[str, Any] = {}
    if rows and not failures:
        try:
            ids, texts = overlap(rows, train, row_key)
        except (OSError, ValueError) as exc:
            failures.append(f"training parquet: {exc}")
        else:
            held = {"train_files": [str(p) for p in train], "eval_rows": len(rows), "overlapping_ids": ids,
                    "overlapping_texts": texts, "allowed_overlap": allow_overlap}
            if (ids or texts) and not allow_overlap:
                failures.append(
                    f"{len(ids)} evaluation id(s) and {len(texts)} text(s) of {val} are also in the training data "
                    f"(e.g. {(ids or texts)[0]!r}): the evaluation would not be held out. Prepare disjoint splits "
                    "(prepare_data.py does), or pass --allow-overlap for a deliberate check")
    return held, failures


def _folder_problems(checkpoints: Sequence[Checkpoint]) -> list[str]:
    """Each model folder's problems; the first checkpoint, the base, must be a full Qwen3-TTS folder."""
    failures: list[str] = []
    for ckpt in checkpoints:
        problems = list(ckpt.folder.problems)
        if not problems and ckpt.folder.kind is FolderKind.FULL:
            problems += full_tts_problems(ckpt.folder)
        elif not problems and ckpt.folder.kind is FolderKind.OTHER:
            problems.append(f"{ckpt.spec}: {ckpt.folder.path} is not a Qwen3-TTS model folder "
                            f"(model_type {ckpt.folder.model_type!r})")
        elif not problems and ckpt.folder.kind is FolderKind.TALKER_ONLY and ckpt is checkpoints[0]:
            problems.append(f"{ckpt.spec}: the base must be the full Qwen3-TTS Base folder, not a "
                            f"{FolderKind.TALKER_ONLY.value}")
        failures += [p if p.startswith(ckpt.spec) else f"{ckpt.name}: {p}" for p in problems]
    return failures


def _speaker_embedding(spk_embed: Path, base: ModelFolder) -> tuple[list[float], list[str]]:
    """The speaker embedding, and its problems: missing, unreadable, empty, or not as wide as the base's talker."""
    if not spk_embed.is_file():
        return [], [f"speaker embedding {spk_embed} does not exist (the run's SPK_EMBED_PATH; make one with "
                    "`audio-reward tts-speaker REF.wav --out voice.json`)"]
    try:
        embedding = read_speaker_embedding(spk_embed)
    except (OSError, ValueError) as exc:
        return [], [f"speaker embedding {spk_embed}: {exc}"]
    if not embedding:
        return [], [f"speaker embedding {spk_embed} holds no numbers"]
    if (width := speaker_width(base)) is not None and len(embedding) != width:
        return embedding, [f"speaker embedding {spk_embed} has {len(embedding)} values, the talker of {base.path} "
                           f"takes {width}: it was made with another model size"]
    return embedding, []


def check_inputs(checkpoints: list[Checkpoint], spk_embed: Path, val: Path, train: Sequence[Path],
                 limit: int | None, allow_overlap: bool) -> tuple[list[EvalRow], list[float], dict[str, Any]]:
    """Every check that can fail before a model is loaded; raises :class:`InputsInvalid` with all failures.

    Returns the rows to evaluate, the speaker embedding and the held-out record.
    """
    embedding, speaker = _speaker_embedding(spk_embed, checkpoints[0].folder)
    rows, unread = read_validation(validation_rows, val, limit)
    held, leaks = check_held_out(rows, val, train, allow_overlap)
    if failures := [*_folder_problems(checkpoints), *speaker, *unread, *leaks]:
        raise InputsInvalid(failures)
    return rows, embedding, held


def sample_ids(row: EvalRow, decoding: Decoding) -> list[str]:
    """The utterance ids of a text's samples: its own id when there is one sample, ``ID.sK`` otherwise."""
    return [row.id] if decoding.greedy or decoding.samples == 1 else [f"{row.id}.s{k}" for k in range(decoding.samples)]


def synthesize(load_dir: Path, rows: Sequence[EvalRow], embedding: list[float], language: str, out: Path,
               device: str, decoding: Decoding, speaker_reference: Path | None = None) -> Path:
    """Synthesise every row the way the run's rollout does; returns the manifest.  WAVs already there are kept.

    Each manifest row names ``speaker_reference`` (else the row's own) as its reference recording, so a
    scorer with a speaker model measures the utterance's similarity to the voice it should have.  A folder
    synthesised with other decoding settings is refused (its WAVs would be mixed with these).
    """
    import numpy as np
    import soundfile as sf
    import torch
    from qwen_tts import Qwen3TTSModel
    from qwen_tts.inference.qwen3_tts_model import VoiceClonePromptItem

    settings = decoding.record()
    marker = out / DECODING_JSON
    if marker.is_file() and json.loads(marker.read_text(encoding="utf-8")) != settings:
        raise ValueError(f"{out} holds WAVs decoded with other settings ({marker}); delete it or use another --out")
    out.mkdir(parents=True, exist_ok=True)
    marker.write_text(json.dumps(settings, indent=2) + "\n", encoding="utf-8")
    manifest = out / "manifest.jsonl"
    todo = [(r, k, target) for r in rows for k, sid in enumerate(sample_ids(r, decoding))
            if not (target := out / f"{_safe(sid)}.wav").is_file()]
    if todo:
        dtype = torch.float32 if device == "cpu" else torch.bfloat16
        model = Qwen3TTSModel.from_pretrained(str(load_dir), device_map=device, dtype=dtype)
        voice = VoiceClonePromptItem(ref_code=None, ref_spk_embedding=torch.tensor(embedding, dtype=dtype),
                                     x_vector_only_mode=True, icl_mode=False)
        print(f"eval_checkpoints: synthesising {len(todo)} utterance(s) with {load_dir}", file=sys.stderr)
        for row, k, target in todo:
            torch.manual_seed(decoding.sample_seed(row.id, k))
            wavs, rate = model.generate_voice_clone(
                text=row.text, language=language, voice_clone_prompt=[voice], non_streaming_mode=True,
                **decoding.generate_kwargs())
            sf.write(target.with_suffix(".part.wav"), np.asarray(wavs[0], dtype=np.float32), rate)
            target.with_suffix(".part.wav").replace(target)  # a half-written WAV never counts as done
    with manifest.open("w", encoding="utf-8") as f:
        for row in rows:
            for sid in sample_ids(row, decoding):
                entry = {"id": sid, "audio": f"{_safe(sid)}.wav", "text": row.text}
                if row.language:
                    entry["language"] = row.language
                # absolute: the manifest lives elsewhere than the path was written for
                if reference := speaker_reference or row.speaker_reference:
                    entry["speaker_reference"] = str(Path(reference).resolve())
                f.write(json.dumps(entry, ensure_ascii=False) + "\n")
    return manifest


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def parse_specs(specs: Sequence[str]) -> list[tuple[str, str]]:
    """``NAME=MODEL_DIR`` arguments as (name, folder) pairs; a malformed or repeated name raises
    :class:`InputsInvalid`."""
    out: list[tuple[str, str]] = []
    for spec in specs:
        name, sep, model_dir = spec.partition("=")
        if not sep or not name or not model_dir:
            raise InputsInvalid([f"checkpoint {spec!r} must be NAME=MODEL_DIR"])
        if name in {n for n, _ in out}:
            raise InputsInvalid([f"checkpoint name {name!r} is given twice"])
        out.append((name, model_dir))
    return out


def parse_checkpoints(specs: Sequence[str]) -> list[Checkpoint]:
    """The base and at least one trained checkpoint, each folder inspected; :class:`InputsInvalid` otherwise."""
    if len(specs) < 2:
        raise InputsInvalid(["give the base and at least one trained checkpoint: base=DIR NAME=DIR"])
    return [Checkpoint(name, spec, inspect_folder(model_dir))
            for spec, (name, model_dir) in zip(specs, parse_specs(specs), strict=True)]


def heldout_parser(doc: str | None, out_help: str, device_help: str) -> argparse.ArgumentParser:
    """The arguments both checkpoint evaluations take: checkpoints, held-out and training data, output, device."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("checkpoints", nargs="+", metavar="NAME=MODEL_DIR", help="the base first, then trained ones")
    parser.add_argument("--val", required=True, type=Path, help="validation parquet (prepare_data.py's val.parquet)")
    parser.add_argument("--train", required=True, type=Path, action="append",
                        help="training parquet the checkpoints were trained on (repeat for several)")
    parser.add_argument("--allow-overlap", action="store_true",
                        help="report, but do not refuse, evaluation rows that are also training rows")
    parser.add_argument("--out", required=True, type=Path, help=out_help)
    parser.add_argument("--limit", type=int, default=None, help="first N validation rows only")
    parser.add_argument("--device", default="cuda:0", help=f"torch device {device_help} (default cuda:0)")
    return parser


def print_failures(prog: str, lines: Sequence[str]) -> int:
    """Print each failure as ``prog: line`` on stderr; returns exit status 1."""
    for line in lines:
        print(f"{prog}: {line}", file=sys.stderr)
    return 1


def check_device(device: str) -> None:
    """:class:`InputsInvalid` when ``device`` is a CUDA device and none is visible here."""
    import torch

    if device.startswith("cuda") and not torch.cuda.is_available():
        raise InputsInvalid([f"--device {device}: no CUDA device is visible here; pass --device cpu for tiny models"])


def build_parser() -> argparse.ArgumentParser:
    """The command line; its decoding defaults are the TTS recipe's rollout settings."""
    from ....scorer_client.cli import add_client_options

    parser = heldout_parser(__doc__, out_help="output folder (reused to resume)", device_help="for synthesis")
    parser.add_argument("--spk-embed", required=True, type=Path,
                        help="the run's speaker embedding JSON (SPK_EMBED_PATH / tts_spk_embed_path)")
    parser.add_argument("--tts-language", default=DEFAULT_LANGUAGE,
                        help=f"the run's tts_language (default {DEFAULT_LANGUAGE}, what verl-omni trains with)")
    parser.add_argument("--max-new-tokens", type=int, default=TTS_MAX_FRAMES,
                        help=f"codec frames per utterance at most (default {TTS_MAX_FRAMES}, the recipe's "
                             "data.max_response_length)")
    parser.add_argument("--samples", type=int, default=DEFAULT_SAMPLES,
                        help=f"samples per text, each with its own fixed seed (default {DEFAULT_SAMPLES})")
    parser.add_argument("--seed", type=int, default=0, help="seed the per-sample seeds derive from (default 0)")
    parser.add_argument("--greedy", action="store_true",
                        help="one greedy sample per text instead of the rollout's sampling")
    parser.add_argument("--speaker-reference", type=Path, default=None,
                        help="the recording the speaker embedding was made from (tts-speaker REF.wav); default: "
                             "each validation row's extra_info.speaker_reference_path. With a scorer started with "
                             "--speaker-model, each utterance gets its speaker similarity to it")
    add_client_options(parser)
    return parser


def decoding_from_args(args: argparse.Namespace) -> Decoding:
    """The decoding the parsed command line asks for (one sample when greedy)."""
    return Decoding(greedy=args.greedy, max_new_tokens=args.max_new_tokens,
                    samples=1 if args.greedy else args.samples, seed=args.seed)


def _check_environment(args: argparse.Namespace) -> None:
    """Flags, installed modules and the device, before anything is read: InputsInvalid otherwise."""
    from ....extras import missing_modules
    from ....scorer_client.eval.cli import EVAL_EXTRA, EVAL_MODULES

    if args.samples < 1 or args.max_new_tokens < 1:
        raise InputsInvalid(["--samples and --max-new-tokens must be at least 1"])
    if missing := missing_modules((*EVAL_MODULES, "pyarrow", "qwen_tts")):
        raise InputsInvalid([f"{' and '.join(missing)} not installed: run this in the TTS-model environment "
                             f"(scripts/envs/tts.sh) with the eval extra, {EVAL_EXTRA}"])
    check_device(args.device)
    if args.speaker_reference is not None and not args.speaker_reference.is_file():
        raise InputsInvalid([f"--speaker-reference {args.speaker_reference} does not exist"])


def _place(checkpoints: Sequence[Checkpoint], out: Path) -> None:
    """Set each checkpoint's ``load_dir``: its folder, or a talker-only export spliced into the base."""
    from .splice import SpliceError, splice_talker

    base = checkpoints[0]
    for ckpt in checkpoints:
        if ckpt.folder.kind is not FolderKind.TALKER_ONLY:
            ckpt.load_dir = ckpt.folder.path
            continue
        try:
            report = splice_talker(base.folder, ckpt.folder, out / ckpt.name / SPLICED_DIR)
        except SpliceError as exc:
            raise InputsInvalid([f"{ckpt.name}: {exc}"]) from None
        print(f"eval_checkpoints: {ckpt.name} is a {FolderKind.TALKER_ONLY.value}: spliced {report.replaced} "
              f"tensors into {base.name} ({report.kept} kept from it)", file=sys.stderr)
        ckpt.load_dir = out / ckpt.name / SPLICED_DIR


def _evaluate(ckpt: Checkpoint, rows: Sequence[EvalRow], embedding: Any, args: argparse.Namespace,
              decoding: Decoding, settings: Any) -> Any:
    """Synthesize ``ckpt``'s answers to ``rows``, score them on the scorer, and load the scored run."""
    from ....scorer_client.errors import ScorerError
    from ....scorer_client.eval.cli import ProgressBar
    from ....scorer_client.eval.compare import Run
    from ....scorer_client.eval.evaluate import ScoringMismatchError, run_eval

    assert ckpt.load_dir is not None
    try:
        manifest = synthesize(ckpt.load_dir, rows, embedding, args.tts_language, args.out / ckpt.name / SYNTH_DIR,
                              args.device, decoding, args.speaker_reference)
    except ValueError as exc:
        raise InputsInvalid([f"{ckpt.name}: {exc}"]) from None
    try:
        with ProgressBar(sys.stderr.isatty()) as bar:
            summary = asyncio.run(run_eval(manifest, args.out / ckpt.name / EVAL_DIR, settings,
                                           on_start=bar.start, on_row=bar.row))
    except (ScoringMismatchError, ScorerError) as exc:
        raise InputsInvalid([f"{ckpt.name}: scoring failed: {exc}"]) from None
    print(f"eval_checkpoints: {ckpt.name}: {summary['scored']}/{summary['utterances']} scored", file=sys.stderr)
    return Run.load(args.out / ckpt.name / EVAL_DIR, name=ckpt.name, path=str(ckpt.folder.path))


def main(argv: list[str] | None = None) -> int:
    from ....protocol.reports import HeldOut
    from ....scorer_client.cli import client_settings
    from ....scorer_client.eval.compare import compare_runs, results_markdown
    from ....scorer_client.eval.evaluate import ScoringMismatchError

    args = build_parser().parse_args(argv)
    try:
        _check_environment(args)
        checkpoints = parse_checkpoints(args.checkpoints)
        decoding = decoding_from_args(args)
        rows, embedding, held = check_inputs(checkpoints, args.spk_embed, args.val, args.train, args.limit,
                                             args.allow_overlap)
        try:
            settings = client_settings(args)
        except ValueError as exc:
            raise InputsInvalid([one_line(exc)]) from None
        _place(checkpoints, args.out)
        runs = [_evaluate(ckpt, rows, embedding, args, decoding, settings) for ckpt in checkpoints]
        synthesis = {"speaker_embedding": str(args.spk_embed), "tts_language": args.tts_language,
                     "task": "Base, x-vector-only voice clone, non-streaming", **decoding.record(),
                     "device": args.device}
        results = compare_runs(runs, args.out, held_out=HeldOut(**held), synthesis=synthesis)
    except InputsInvalid as exc:
        return print_failures("eval_checkpoints", exc.lines)
    except ScoringMismatchError as exc:
        return print_failures("eval_checkpoints", [str(exc)])
    print(results_markdown(results), end="")
    print(f"results: {args.out / 'eval_results.json'}  plot: {args.out / 'compare.png'}  "
          f"report: {args.out / 'report.html'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
