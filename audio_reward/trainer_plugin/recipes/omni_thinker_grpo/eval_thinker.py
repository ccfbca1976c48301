"""The thinker's audio ablation: held-out questions answered with the audio and with it stripped, per checkpoint.

    python -m audio_reward.trainer_plugin.recipes.omni_thinker_grpo.eval_thinker \\
        --val data/omni_avqa/val.parquet --train data/omni_avqa/train.parquet --out eval_thinker/ \\
        base=/models/Qwen3-Omni-30B-A3B-Instruct step150=exports/thinker150

(``exports/thinker150``: the run's LoRA checkpoint merged by ``audio-reward
export-checkpoint .../checkpoints/global_step_150 --out exports/thinker150``.)

Each ``NAME=MODEL_DIR`` is a full Qwen3-Omni folder (the thinker is loaded,
the talker is not) or a thinker-only one; the first is the base.  Every
question of ``--val`` (``prepare_data.py``'s validation split) is asked twice
per checkpoint: **with the audio** (the clip of the row's ``audios`` column
where the prompt's ``<audio>`` placeholder stands, the message layout verl's
``RLHFDataset`` builds for training) and **without it** (no clip, no audio
features, the placeholder removed from the prompt).  Answers are graded by
:func:`audio_reward.scoring.choice.score_choice`, the recipe's reward, with
format weight 0: accuracy.  Decoding is greedy, as the recipe's validation
(``val_kwargs.do_sample=false``) and the published ablation decode, at most
the recipe's ``data.max_response_length`` tokens; ``--temperature T``
samples instead, each question and mode under its own fixed seed.

Greedy questions are asked ``--batch-size`` at a time (default 8; 1 asks
one at a time) in one HF ``generate`` call: prompts padded on the left
with their attention mask, clips stacked with their feature mask, each
answer cut after its own end of turn.  On the tiny test thinkers the
batched answers are the one-at-a-time answers, token for token, in both
modes; on a GPU in bfloat16 a padded batch can round differently and, on a
near tie, pick another token, so the results record ``batch_size``.
Sampling is asked one question at a time whatever ``--batch-size`` says:
its fixed seed per question and mode seeds the one random stream a
``generate`` call draws from, and questions in one batch would share it.
There is no vLLM path: vLLM 0.28 (the trainer environment's) registers only
the full ``Qwen3OmniMoeForConditionalGeneration`` layout, not a thinker-only
export, and no vLLM serving of a Qwen3-Omni model could be tested here.

A model that reads the audio scores higher with it; the gap
(``with - without``) is what shows the trained thinker listens rather than
guessing from the text.  ``--out`` receives ``thinker_eval_results.json``
(schema: ``audio_reward/protocol/schemas/v1/thinker_eval_results.schema.json``:
accuracy per checkpoint and mode, the gap, and every answer with its grade
and the count of audio tokens the model was given) and ``report.md`` (the
checkpoints × with/without-audio table).  Before a model is loaded it checks
the folders and that no validation row is a training row (by id, and by clip
and question), one line per failure and exit 1; ``--allow-overlap`` reports
instead of refusing.

The model inputs are built from the checkpoint's own processor parts, the
tokenizer (with its chat template) and the audio feature extractor, the
way ``Qwen3OmniMoeProcessor`` builds them for audio (its audio keyword
defaults, each audio token expanded to the encoder's output length by
transformers' own length function).  The whole processor class is not
used because it needs a video processor, which needs torchvision, and
torchvision's only build for torch 2.13 on the package index (0.28.0) is a
CUDA build that does not import beside the CPU torch the tests use; an audio
question has no image or video anyway.  Clips are read with the package's
one audio reader (``clips.load_clip`` over ``protocol.audio.read_audio``) and
resampled with soxr (high quality) to the extractor's rate, as Qwen's
``process_mm_info`` loads them for training (librosa at 16 kHz, whose default
resampler is soxr's).  Run it in the trainer environment (torch,
transformers with ``qwen3_omni_moe``, pyarrow, soxr).
"""

from __future__ import annotations

import argparse
import gc
import json
import re
import sys
import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from ....scorer_client.eval.stats import markdown_table, percentage_points
from ....scoring.choice import EXTRACTION_METHODS, ground_truth_letter, parse_options, score_choice
from ...clips import load_clip
from ...model_folder import inspect_folder
from ..overrides import THINKER_MAX_RESPONSE
from ..qwen3_tts_grpo.eval_checkpoints import (
    InputsInvalid,
    Keyed,
    check_device,
    check_held_out,
    heldout_parser,
    parquet_rows,
    parse_specs,
    print_failures,
    read_validation,
)

if TYPE_CHECKING:
    from ....protocol.reports import ThinkerEvalResults

AUDIO_PLACEHOLDER = "<audio>"
"""The placeholder verl's ``RLHFDataset`` replaces with the row's next clip (``_build_messages``)."""
Mode = Literal["with_audio", "without_audio"]
MODES: tuple[Mode, Mode] = ("with_audio", "without_audio")
MODEL_TYPES = ("qwen3_omni_moe", "qwen3_omni_moe_thinker")
"""The model types this evaluation loads: a full Qwen3-Omni folder (its thinker is loaded), or a thinker-only one."""
DEFAULT_BATCH_SIZE = 8
"""Greedy questions per ``generate`` call; sampling asks one at a time (one seeded random stream per question)."""
RESULTS_JSON = "thinker_eval_results.json"
REPORT_MD = "report.md"


@dataclass(frozen=True)
class Question(Keyed):
    """One validation row: its chat, clips, options and correct letter.

    Its ``text`` is what a leak would repeat (the clips and the user turn); the held-out check compares it
    normalised.
    """

    prompt: tuple[tuple[str, str], ...]
    """(role, content) of each message as prepare_data writes them, ``<audio>`` placeholders included."""
    audios: tuple[str, ...]
    options: dict[str, str]
    truth: str


def row_key(row: dict[str, Any], position: int) -> tuple[str, str]:
    """A row's id (``extra_info.id``, else ``extra_info.index``) and its clips with the user turn."""
    extra = row.get("extra_info") or {}
    rid = extra.get("id", extra.get("index", position))
    user = " ".join(str(m.get("content", "")) for m in row.get("prompt") or [] if m.get("role") == "user")
    return str(rid), " ".join([*(str(a) for a in row.get("audios") or []), user])


def questions(path: Path, limit: int | None) -> list[Question]:
    """The rows of a thinker parquet; a row without clips, options or a readable answer raises ValueError."""
    out: dict[str, Question] = {}  # by id, in file order: a repeated id is found in it
    for i, row in enumerate(parquet_rows(path)):
        rid, text = row_key(row, i)
        if rid in out:
            raise ValueError(f"{path}: id {rid!r} appears twice")
        prompt = tuple((str(m["role"]), str(m["content"])) for m in row.get("prompt") or [])
        audios = tuple(str(a) for a in row.get("audios") or [])
        placeholders = sum(content.count(AUDIO_PLACEHOLDER) for _, content in prompt)
        if not audios or placeholders != len(audios):
            raise ValueError(f"row {rid}: {len(audios)} clip(s) in 'audios' and {placeholders} {AUDIO_PLACEHOLDER} "
                             "placeholder(s) in the prompt; an audio question needs one of each per clip")
        options = parse_options((row.get("extra_info") or {}).get("options"))
        if len(options) < 2:
            raise ValueError(f"row {rid}: extra_info.options holds {len(options)} option(s)")
        truth = ground_truth_letter((row.get("reward_model") or {}).get("ground_truth"), options)
        out[rid] = Question(rid, text, prompt, audios, options, truth)
    return list(out.values())[:limit or None]


def messages(question: Question, mode: Mode) -> list[dict[str, Any]]:
    """The chat the model gets: verl's training layout with the clips, or every placeholder removed without them.

    With audio every message's content becomes a list of parts, as verl's
    ``RLHFDataset._build_messages`` turns it for a row with media.
    """
    if mode == "without_audio":
        return [{"role": role, "content": content.replace(AUDIO_PLACEHOLDER, "")} for role, content in question.prompt]
    clips = iter(question.audios)  # each placeholder, in order, takes the next clip
    placeholder = f"({re.escape(AUDIO_PLACEHOLDER)})"
    return [{"role": role, "content": [{"type": "audio", "audio": next(clips)} if segment == AUDIO_PLACEHOLDER
                                       else {"type": "text", "text": segment}
                                       for segment in re.split(placeholder, content) if segment]}
            for role, content in question.prompt]


def folder_problems(spec: str, path: Path) -> list[str]:
    """Why ``path`` is not a Qwen3-Omni model folder this evaluation loads (empty when it is)."""
    folder = inspect_folder(path)
    # A config naming another model says all there is to say; a config naming none, only when nothing else is wrong.
    if folder.model_type not in MODEL_TYPES and (folder.model_type is not None or not folder.problems):
        return [f"{spec}: {path} is a {folder.model_type!r} model, not Qwen3-Omni ({', '.join(MODEL_TYPES)})"]
    return [f"{spec}: {problem}" for problem in folder.problems]


def processing_problems(spec: str, path: Path) -> list[str]:
    """The base folder must hold the tokenizer and the audio feature extractor every checkpoint is asked with."""
    missing = [name for name in ("preprocessor_config.json", "tokenizer_config.json") if not (path / name).is_file()]
    return [f"{spec}: {path} lacks {', '.join(missing)}: the base folder gives the tokenizer and the audio feature "
            "extractor"] if missing else []


def check_inputs(specs: Sequence[str], val: Path, train: Sequence[Path], limit: int | None,
              allow_overlap: bool) -> tuple[list[tuple[str, Path]], list[Question], dict[str, Any]]:
    """Every check that can fail before a model is loaded; raises :class:`InputsInvalid` with all failures."""
    checkpoints = [(name, Path(folder).expanduser()) for name, folder in parse_specs(specs)]
    failures = [p for spec, (_, folder) in zip(specs, checkpoints, strict=True) for p in folder_problems(spec, folder)]
    if checkpoints and not failures:
        failures += processing_problems(specs[0], checkpoints[0][1])
    rows, lines = read_validation(questions, val, limit)
    failures += lines
    if missing := sorted({a for q in rows for a in q.audios if not Path(a).is_file()}):
        failures.append(f"{len(missing)} clip(s) of {val} do not exist (e.g. {missing[0]})")
    held, lines = check_held_out(rows, val, train, allow_overlap, row_key)
    if failures or lines:
        raise InputsInvalid(failures + lines)
    return checkpoints, rows, held


@dataclass(frozen=True)
class Decoding:
    """Greedy by default (the recipe's validation); a temperature samples with a seed per question and mode."""

    max_new_tokens: int = THINKER_MAX_RESPONSE
    temperature: float = 0.0
    seed: int = 0

    def generate_kwargs(self, question_id: str, mode: Mode) -> dict[str, Any]:
        """``generate`` keywords; sampling seeds torch's generator first, from (seed, id, mode)."""
        if self.temperature <= 0:
            return {"do_sample": False, "max_new_tokens": self.max_new_tokens}
        import torch

        torch.manual_seed(zlib.crc32(f"{self.seed}:{question_id}:{mode}".encode()))
        # the rollout's top_p=1 and top_k=-1 (off), as the recipe leaves them
        return {"do_sample": True, "temperature": self.temperature, "top_p": 1.0, "top_k": 0,
                "max_new_tokens": self.max_new_tokens}

    def batch_size(self, requested: int) -> int:
        """Questions per ``generate`` call: ``requested`` when greedy; 1 when sampling (a random stream each)."""
        return requested if self.temperature <= 0 else 1

    def record(self) -> dict[str, str | int | float]:
        """What the results file records under ``decoding``."""
        if self.temperature <= 0:
            return {"decoding": "greedy", "max_new_tokens": self.max_new_tokens}
        return {"decoding": "sampling", "temperature": self.temperature, "top_p": 1.0, "top_k": -1,
                "seed": self.seed, "max_new_tokens": self.max_new_tokens}


class Prompter:
    """Model inputs from a folder's tokenizer and audio feature extractor, as the Qwen3-Omni processor builds them."""

    def __init__(self, folder: Path) -> None:
        from transformers import AutoFeatureExtractor, AutoTokenizer

        self.tokenizer = AutoTokenizer.from_pretrained(str(folder))
        self.features = AutoFeatureExtractor.from_pretrained(str(folder))
        self.audio_token: str = self.tokenizer.audio_token
        self.audio_token_id: int = self.tokenizer.convert_tokens_to_ids(self.audio_token)  # type: ignore[assignment]
        template = folder / "chat_template.json"  # the processor's file, where the tokenizer has no template
        self.chat_template: str | None = (None if self.tokenizer.chat_template or not template.is_file()
                                          else json.loads(template.read_text(encoding="utf-8"))["chat_template"])

    def stop(self, model: Any) -> dict[str, Any]:
        """The ids that end an answer: the model's own, and the tokenizer's end of turn (``<|im_end|>``) always."""
        own = model.generation_config.eos_token_id
        ids = [] if own is None else [own] if isinstance(own, int) else list(own)
        return {"eos_token_id": sorted({*ids, int(self.tokenizer.eos_token_id)}),
                "pad_token_id": self.tokenizer.pad_token_id}

    def load_clip(self, path: str) -> Any:
        return load_clip(path, int(self.features.sampling_rate))

    def inputs(self, question: Question, mode: Mode) -> dict[str, Any]:
        """Token ids, attention mask and, with audio, ``input_features``/``feature_attention_mask`` (batch of one)."""
        from transformers.models.qwen3_omni_moe.processing_qwen3_omni_moe import (
            Qwen3OmniMoeProcessorKwargs,
            _get_feat_extract_output_lengths,
        )

        text = str(self.tokenizer.apply_chat_template(messages(question, mode), add_generation_prompt=True,
                                                      tokenize=False, chat_template=self.chat_template))
        clips = [self.load_clip(a) for a in question.audios] if mode == "with_audio" else []
        if text.count(self.audio_token) != len(clips):
            raise ValueError(f"question {question.id}: the chat template rendered {text.count(self.audio_token)} "
                             f"audio token(s) for {len(clips)} clip(s)")
        audio: dict[str, Any] = {}
        if clips:
            kwargs = dict(Qwen3OmniMoeProcessorKwargs._defaults["audio_kwargs"])  # type: ignore[attr-defined]
            kwargs["sampling_rate"] = self.features.sampling_rate
            feats = self.features(clips, return_tensors="pt", **kwargs)
            lengths = _get_feat_extract_output_lengths(feats["attention_mask"].sum(-1)).tolist()
            pieces = text.split(self.audio_token)
            text = pieces[0] + "".join(self.audio_token * int(n) + p for n, p in zip(lengths, pieces[1:], strict=True))
            audio = {"input_features": feats["input_features"], "feature_attention_mask": feats["attention_mask"]}
        return {**self.tokenizer(text, return_tensors="pt"), **audio}


def load_thinker(folder: Path, device: str) -> Any:
    """The thinker of a full Qwen3-Omni folder (its talker not built) or of a thinker-only folder, in eval mode."""
    import torch
    from transformers import AutoConfig
    from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import (
        Qwen3OmniMoeForConditionalGeneration,
        Qwen3OmniMoeThinkerForConditionalGeneration,
    )

    dtype = torch.float32 if device == "cpu" else torch.bfloat16
    config = AutoConfig.from_pretrained(str(folder))
    if config.model_type == "qwen3_omni_moe":
        config.enable_audio_output = False  # the talker answers nothing here; not building it saves its memory
        model = Qwen3OmniMoeForConditionalGeneration.from_pretrained(str(folder), config=config, dtype=dtype).thinker
    else:
        model = Qwen3OmniMoeThinkerForConditionalGeneration.from_pretrained(str(folder), dtype=dtype)
    return model.to(device).eval()


def collate(inputs: Sequence[dict[str, Any]], pad_token_id: int) -> dict[str, Any]:
    """One batch from :meth:`Prompter.inputs` of several questions, each a batch of one.

    Token ids and the attention mask are padded on the left, so every
    prompt ends where generation starts (the processor's own text padding
    side).  Every other input (audio features and their mask, time last) is
    padded on the right with zeros and the clips stacked: the feature mask
    marks each clip's own frames, and the model encodes only those.
    """
    import torch
    from torch.nn.functional import pad

    width = max(int(x["input_ids"].shape[1]) for x in inputs)
    batch = {"input_ids": torch.cat([pad(x["input_ids"], (width - x["input_ids"].shape[1], 0), value=pad_token_id)
                                     for x in inputs]),
             "attention_mask": torch.cat([pad(x["attention_mask"], (width - x["attention_mask"].shape[1], 0))
                                          for x in inputs])}
    for key in inputs[0].keys() - batch.keys():
        frames = max(int(x[key].shape[-1]) for x in inputs)
        batch[key] = torch.cat([pad(x[key], (0, frames - x[key].shape[-1])) for x in inputs])
    return batch


def ask_batch(model: Any, prompter: Prompter, batch: Sequence[Question], mode: Mode, decoding: Decoding,
              device: str) -> list[dict[str, Any]]:
    """Questions in one mode, one greedy ``generate`` call: each answer, graded, as a ``ThinkerAnswer`` row
    without its checkpoint.

    Each response is cut after its first end-of-turn id, where a question
    asked alone stops; the rest of its row is padding.  Greedy only: a
    sampled answer draws from one random stream per question (see
    :meth:`Decoding.generate_kwargs`), which a shared batch cannot give.
    """
    import torch

    inputs = [prompter.inputs(q, mode) for q in batch]
    stop = prompter.stop(model)
    joined = collate(inputs, int(stop["pad_token_id"]))
    with torch.inference_mode():
        out = model.generate(**{k: v.to(device) for k, v in joined.items()},
                             **stop, **decoding.generate_kwargs(batch[0].id, mode))
    answers = []
    for question, ids, row in zip(batch, inputs, out[:, joined["input_ids"].shape[1]:].cpu(), strict=True):
        ends = torch.isin(row, torch.tensor(stop["eos_token_id"])).nonzero()
        new = row[:int(ends[0]) + 1] if len(ends) else row
        answers.append(_answer(prompter, question, mode, ids["input_ids"], new))
    return answers


def _answer(prompter: Prompter, question: Question, mode: Mode, ids: Any, new: Any) -> dict[str, Any]:
    response = str(prompter.tokenizer.decode(new, skip_special_tokens=True))
    grade = score_choice(response, question.truth, question.options)
    chosen = int(grade["extracted"])
    return {"id": question.id, "mode": mode, "ground_truth": question.truth,
            "chosen": chr(ord("A") + chosen) if chosen >= 0 else None,
            "extraction": EXTRACTION_METHODS[int(grade["extraction"])], "correct": grade["acc"] == 1.0,
            "format_ok": grade["format_ok"] == 1.0,
            "audio_clips": len(question.audios) if mode == "with_audio" else 0,
            "audio_tokens": int((ids == prompter.audio_token_id).sum()), "prompt_tokens": int(ids.shape[1]),
            "response_tokens": int(new.shape[0]), "response": response}


def ask_all(model: Any, prompter: Prompter, rows: Sequence[Question], mode: Mode, decoding: Decoding, device: str,
            batch_size: int) -> list[dict[str, Any]]:
    """Every question in one mode, ``batch_size`` per ``generate`` call (one at a time when sampling)."""
    size = decoding.batch_size(batch_size)
    return [a for k in range(0, len(rows), size)
            for a in ask_batch(model, prompter, rows[k:k + size], mode, decoding, device)]


def results(checkpoints: Sequence[tuple[str, Path]], answers: Sequence[dict[str, Any]], held: dict[str, Any],
            decoding: dict[str, Any]) -> ThinkerEvalResults:
    """The results file: accuracy per checkpoint and mode, the with-minus-without gap, every answer."""
    from .... import __version__
    from ....protocol.reports import HeldOut, ModeAccuracy, ThinkerAnswer, ThinkerCheckpoint, ThinkerEvalResults

    def mode_accuracy(name: str, mode: Mode) -> ModeAccuracy:
        rows = [a for a in answers if a["checkpoint"] == name and a["mode"] == mode]
        correct = sum(a["correct"] for a in rows)
        return ModeAccuracy(questions=len(rows), correct=correct, answered=sum(a["chosen"] is not None for a in rows),
                            accuracy=correct / len(rows) if rows else None)

    stats = []
    for name, folder in checkpoints:
        with_audio, without = mode_accuracy(name, "with_audio"), mode_accuracy(name, "without_audio")
        gap = (with_audio.accuracy - without.accuracy
               if with_audio.accuracy is not None and without.accuracy is not None else None)
        stats.append(ThinkerCheckpoint(name=name, path=str(folder), with_audio=with_audio, without_audio=without,
                                       audio_gap=gap))
    return ThinkerEvalResults(created_by=f"audio-reward {__version__}", base=checkpoints[0][0], checkpoints=stats,
                              answers=[ThinkerAnswer(**a) for a in answers],
                              held_out=HeldOut(**held) if held else None, decoding=decoding, report=[REPORT_MD])


def _percent(stats: Any) -> str:
    return "n/a" if stats.accuracy is None else f"{100 * stats.accuracy:.1f} % ({stats.correct}/{stats.questions})"


def report_markdown(res: ThinkerEvalResults) -> str:
    """The checkpoints × with/without-audio accuracy table, with the gap, as markdown."""
    lines = markdown_table(["checkpoint", "with audio", "without audio", "gap (with - without)"],
                           ([c.name, _percent(c.with_audio), _percent(c.without_audio),
                             percentage_points(c.audio_gap, 1)] for c in res.checkpoints))
    questions = res.checkpoints[0].with_audio.questions
    decoding = ", ".join(f"{k}={v}" for k, v in res.decoding.items())
    return (f"# Audio ablation: {questions} held-out questions\n\n" + "\n".join(lines) + "\n\n"
            f"Accuracy is the multiple-choice reward's (format weight 0); decoding: {decoding}. Without audio the "
            "model gets no clip and the prompt no audio placeholder. A gap near zero means the answers do not "
            "depend on the audio.\n")


def ablation(checkpoints: Sequence[tuple[str, Path]], rows: Sequence[Question], held: dict[str, Any],
             load: Callable[[Path], Any], prompter: Prompter, decoding: Decoding, device: str, batch_size: int,
             out: Path) -> ThinkerEvalResults:
    """Every question in both modes on each checkpoint (``load`` builds its model, one at a time); writes the
    results file and ``report.md`` into ``out`` and returns the results.

    ``prompter`` (the base's) asks every checkpoint; ``held`` is
    :func:`check_held_out`'s record.
    """
    answers: list[dict[str, Any]] = []
    for name, folder in checkpoints:
        model = load(folder)
        for mode in MODES:
            print(f"eval_thinker: {name}, {mode.replace('_', ' ')}: {len(rows)} question(s)", file=sys.stderr)
            answers += [{"checkpoint": name, **a}
                        for a in ask_all(model, prompter, rows, mode, decoding, device, batch_size)]
        del model
        gc.collect()
    res = results(checkpoints, answers, held,
                  {**decoding.record(), "device": device, "batch_size": decoding.batch_size(batch_size)})
    out.mkdir(parents=True, exist_ok=True)
    (out / RESULTS_JSON).write_text(res.model_dump_json(indent=2) + "\n", encoding="utf-8")
    (out / REPORT_MD).write_text(report_markdown(res), encoding="utf-8")
    return res


def build_parser() -> argparse.ArgumentParser:
    """The command line; its decoding defaults are the thinker recipe's validation settings."""
    parser = heldout_parser(__doc__, out_help="output folder", device_help="for the thinker")
    parser.add_argument("--max-new-tokens", type=int, default=THINKER_MAX_RESPONSE,
                        help=f"answer tokens at most (default {THINKER_MAX_RESPONSE}, the recipe's "
                             "data.max_response_length)")
    parser.add_argument("--temperature", type=float, default=0.0,
                        help="0 (default): greedy, as the recipe validates; above 0: sample, seeded per question")
    parser.add_argument("--seed", type=int, default=0, help="seed the per-question sampling seeds derive from")
    parser.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE,
                        help=f"greedy questions per generate call (default {DEFAULT_BATCH_SIZE}; 1: one at a time); "
                             "sampling asks one at a time")
    return parser


def main(argv: list[str] | None = None) -> int:
    from ....extras import missing_modules

    args = build_parser().parse_args(argv)
    if args.max_new_tokens < 1 or args.temperature < 0 or args.batch_size < 1:
        return print_failures("eval_thinker", ["--max-new-tokens and --batch-size must be at least 1 and "
                                               "--temperature 0 or more"])
    if missing := missing_modules(("torch", "pyarrow", "soxr", "transformers.models.qwen3_omni_moe")):
        return print_failures("eval_thinker", [f"{', '.join(missing)} not installed: run this in the trainer "
                                               "environment (scripts/envs/verl.sh), whose transformers has Qwen3-Omni"])
    try:
        check_device(args.device)
        checkpoints, rows, held = check_inputs(args.checkpoints, args.val, args.train, args.limit, args.allow_overlap)
    except InputsInvalid as exc:
        return print_failures("eval_thinker", exc.lines)
    res = ablation(checkpoints, rows, held, lambda folder: load_thinker(folder, args.device),
                   Prompter(checkpoints[0][1]), Decoding(args.max_new_tokens, args.temperature, args.seed),
                   args.device, args.batch_size, args.out)
    print(report_markdown(res), end="")
    print(f"results: {args.out / RESULTS_JSON}  report: {args.out / REPORT_MD}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
