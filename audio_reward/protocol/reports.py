"""File formats of the evaluation tools: ``eval_results.json``, from ``eval --compare`` and the checkpoint evaluation,
and ``thinker_eval_results.json``, from the thinker's audio ablation.

Not wire messages, but a contract all the same: other tools read these
files, so their JSON Schema is committed beside the protocol's
(``schemas/v1/eval_results.schema.json``, ``thinker_eval_results.schema.json``)
and a test keeps it equal to these models.  CER, WER and deltas are fractions (0.05 is 5 %), as the server
reports them per utterance; figures are means and medians of per-utterance
values, as Seed-TTS-eval reports them.
"""

from __future__ import annotations

from typing import Any, Final, Literal

from pydantic import BaseModel, Field

from .models import _Closed

EVAL_RESULTS_VERSION: Final = "1"

Scalar = str | int | float | bool | None


class SignalStats(_Closed):
    """One per-utterance signal over a run's scored utterances."""

    mean: float
    median: float
    count: int = Field(ge=1, description="scored utterances that hold the signal")


class CheckpointStats(_Closed):
    """One evaluated run: a checkpoint's synthesised utterances as the scorer scored them."""

    name: str = Field(description="the run's name (NAME of NAME=MODEL_DIR, or the run folder's name)")
    path: str = Field(description="the model folder for a checkpoint evaluation, else the run folder")
    run_dir: str = Field(description="the `audio-reward eval` output folder holding utterances.jsonl")
    count: int = Field(ge=0, description="utterances in the run, failed and refused ones included")
    scored: int = Field(ge=0)
    failures: int = Field(ge=0)
    timeouts: int = Field(ge=0, description="failures that were a 504 or no answer in time")
    mean_cer: float | None = None
    sem_cer: float | None = Field(
        None, description="standard error of the mean CER, each text one unit (its samples averaged first); "
                          "null with fewer than two scored texts")
    median_cer: float | None = None
    mean_wer: float | None = None
    median_wer: float | None = None
    mean_duration_ratio: float | None = Field(None, description="audio duration / expected duration of the text")
    median_duration_ratio: float | None = None
    mean_reward: float | None = Field(None, description="mean of the scorer's per-utterance score")
    signals: dict[str, SignalStats] = Field(
        default_factory=dict,
        description="each signal the scorer answered per utterance (speaker_similarity, dnsmos_ovrl, dnsmos_sig, "
                    "dnsmos_bak, dnsmos_p808; docs/signals.md): its mean, median and count; empty without them")


class UtteranceDelta(_Closed):
    """One utterance in the base run and in a later one; ``delta_* = checkpoint - base`` when both were scored."""

    id: str
    text: str
    base_status: Literal["ok", "error"]
    status: Literal["ok", "error"]
    base_cer: float | None = None
    cer: float | None = None
    delta_cer: float | None = None
    base_wer: float | None = None
    wer: float | None = None
    delta_wer: float | None = None
    base_score: float | None = None
    score: float | None = None
    delta_score: float | None = None
    base_duration_ratio: float | None = None
    duration_ratio: float | None = None


class Comparison(_Closed):
    """A later run against the base run, utterance by utterance (paired by id)."""

    base: str
    checkpoint: str
    paired: int = Field(ge=0, description="ids present in both runs")
    improved: int = Field(ge=0, description="both scored, lower CER than base")
    worse: int = Field(ge=0, description="both scored, higher CER than base")
    unchanged: int = Field(ge=0, description="both scored, equal CER")
    failed_either: int = Field(ge=0, description="paired ids that failed in one run or both")
    mean_delta_cer: float | None = None
    median_delta_cer: float | None = None
    mean_delta_wer: float | None = None
    mean_delta_score: float | None = None
    only_in_base: list[str]
    only_in_checkpoint: list[str]
    utterances: list[UtteranceDelta]


class HeldOut(_Closed):
    """The check that no evaluation row was trained on (by id and by normalised text)."""

    train_files: list[str]
    eval_rows: int = Field(ge=0)
    overlapping_ids: list[str]
    overlapping_texts: list[str]
    allowed_overlap: bool = Field(description="--allow-overlap was given: overlap was reported, not refused")


class _ResultsFile(_Closed):
    """What every evaluation results file opens with: its format's version and the version that wrote it."""

    format_version: Literal["1"] = EVAL_RESULTS_VERSION
    created_by: str = Field(description="audio-reward version that wrote the file")


class EvalResults(_ResultsFile):
    """``eval_results.json``: base and trained checkpoints scored alike, with per-utterance deltas."""

    base: str = Field(description="name of the run every other run is compared with")
    checkpoints: list[CheckpointStats] = Field(min_length=1)
    comparisons: list[Comparison]
    scoring: dict[str, Any] = Field(description="the /v1/info fields that decide a score; equal for every run")
    scorer: dict[str, Any] = Field(description="the scorer's GET /v1/info as the base run recorded it")
    held_out: HeldOut | None = None
    synthesis: dict[str, Scalar] | None = Field(
        None, description="how the checkpoint evaluation synthesised (speaker embedding, language, decoding)")
    plots: list[str] = Field(default_factory=list, description="files beside this one: the before/after plot, report")


AudioMode = Literal["with_audio", "without_audio"]


class ModeAccuracy(_Closed):
    """One checkpoint's answers in one mode: every question asked, graded by the multiple-choice reward."""

    questions: int = Field(ge=0)
    correct: int = Field(ge=0)
    answered: int = Field(ge=0, description="answers in which an option was found, right or wrong")
    accuracy: float | None = Field(None, description="correct / questions (a fraction); null with no questions")


class ThinkerCheckpoint(_Closed):
    """One checkpoint's accuracy with the audio and with the audio stripped."""

    name: str = Field(description="NAME of NAME=MODEL_DIR")
    path: str = Field(description="the model folder")
    with_audio: ModeAccuracy
    without_audio: ModeAccuracy
    audio_gap: float | None = Field(
        None, description="with_audio.accuracy - without_audio.accuracy: how much the answers depend on the audio")


class ThinkerAnswer(_Closed):
    """One question put to one checkpoint in one mode, and its grade."""

    id: str = Field(description="the row's extra_info.index")
    checkpoint: str
    mode: AudioMode
    ground_truth: str = Field(description="the correct option letter")
    chosen: str | None = Field(description="the option the response chose; null when none was found")
    extraction: str = Field(description="how the choice was found (scoring.choice.EXTRACTION_METHODS)")
    correct: bool
    format_ok: bool = Field(description="the response was <think>...</think><answer>X</answer> and nothing else")
    audio_clips: int = Field(ge=0, description="audio clips given to the model")
    audio_tokens: int = Field(ge=0, description="audio placeholder tokens in the model's input ids")
    prompt_tokens: int = Field(ge=0)
    response_tokens: int = Field(ge=0)
    response: str


class ThinkerEvalResults(_ResultsFile):
    """``thinker_eval_results.json``: the audio ablation, base and trained checkpoints × with and without audio."""

    base: str = Field(description="name of the first checkpoint, the one the others are read against")
    checkpoints: list[ThinkerCheckpoint] = Field(min_length=1)
    answers: list[ThinkerAnswer]
    held_out: HeldOut | None = None
    decoding: dict[str, Scalar] = Field(description="how every answer was generated (greedy, token cap, dtype)")
    report: list[str] = Field(default_factory=list, description="files beside this one: the markdown report")


REPORTS: dict[str, type[BaseModel]] = {"eval_results": EvalResults, "thinker_eval_results": ThinkerEvalResults}
"""Schema file stem → model, for the evaluation file formats."""
