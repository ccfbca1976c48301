"""The reward policy: one model, its bounds declared once.

:class:`RewardPolicy` is how an error rate becomes a reward (the formulas are
applied by :mod:`audio_reward.scoring.rewards`).  The server's settings hold
one as the default of every request; a request's ``reward`` object,
:class:`RewardOptions`, is the same fields all optional; each field's type and
bounds is one alias both declare, so a bound is written in one place.
``error_clip`` is the server's alone: requests cannot raise it.

The policy lives in the protocol package, which needs only the base install,
so the client and the trainer import it without the scorer's dependencies.
"""

from __future__ import annotations

import typing
from typing import Annotated, Any, Literal

import annotated_types
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails

from .errors import validation_reasons

__all__ = ["Formula", "Metric", "RewardOptions", "RewardPolicy"]

Formula = Literal["1-cer", "exp", "tanh"]
Metric = Literal["cer", "wer"]

_FORMULA_HELP = "1-cer: 1-min(err,1); exp: exp(-k·err); tanh: clip(1-tanh(3·err),0,1)"
_METRIC_HELP = "Error rate the formula is applied to."

SERVER_ONLY_FIELDS = frozenset({"error_clip"})
"""Policy fields a request cannot set."""


_ExpK = Annotated[float, Field(gt=0, le=100, allow_inf_nan=False)]
_Positive = Annotated[float, Field(gt=0, allow_inf_nan=False)]
_Share = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False)]
_Seconds = Annotated[float, Field(ge=0, allow_inf_nan=False)]
_NgramN = Annotated[int, Field(ge=1, le=16)]
_Similarity = Annotated[float, Field(ge=-1, le=1, allow_inf_nan=False)]


class RewardPolicy(BaseModel):
    """How an error rate becomes a reward; the server's defaults, overridable per request."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    formula: Formula = Field(default="1-cer", description=_FORMULA_HELP)
    metric: Metric = Field(default="cer", description=_METRIC_HELP)
    exp_k: _ExpK = Field(default=2.5, description="k of the exp formula, exp(-k·err).")
    error_clip: _Positive = Field(default=1.0, description="Error rates are clipped to this before the formula.")
    empty_transcript_penalty: _Share = Field(default=0.0, description="Subtracted when the transcript is empty.")
    duration_ratio_min: _Positive = Field(default=0.5, description="Below this duration ratio the duration "
                                                                   "penalty applies.")
    duration_ratio_max: _Positive = Field(default=2.0, description="Above this duration ratio the duration "
                                                                   "penalty applies.")
    duration_penalty: _Share = Field(default=0.0, description="Subtracted outside the duration-ratio range.")
    min_duration_s: _Seconds = Field(default=0.5, description="Audio shorter than this gets the short-audio "
                                                              "penalty.")
    short_audio_penalty: _Share = Field(default=0.0, description="Subtracted for audio below min_duration_s.")
    repeat_ngram_n: _NgramN = Field(default=4, description="n of the repeated n-gram check.")
    repeat_penalty: _Share = Field(default=0.0, description="Scaled by the share of repeated n-grams.")
    speaker_weight: _Share = Field(default=0.0, description="Share of the score taken by speaker similarity "
                                                            "(needs a reference).")
    quality_weight: _Share = Field(default=0.0, description="Share of the score taken by DNSMOS overall quality, "
                                                            "MOS 1-5 as 0-1.")
    speaker_floor: _Similarity = Field(default=-1.0, description="Speaker similarity below this zeroes the score; "
                                                                 "-1 is off.")

    @field_validator("repeat_ngram_n", mode="before")
    @classmethod
    def _whole_number(cls, value: Any) -> Any:
        # A count: 2.0 or True is a caller's mistake, not an n.
        if isinstance(value, (bool, float)):
            raise ValueError("not an integer")
        return value

    @model_validator(mode="after")
    def _fields_agree(self) -> RewardPolicy:
        # The rules between fields, each bound alone being its type's: the ratio band, then the weights' share.
        if self.duration_ratio_min >= self.duration_ratio_max:
            raise ValueError(f"duration_ratio_min ({self.duration_ratio_min}) must be less than "
                             f"duration_ratio_max ({self.duration_ratio_max})")
        if self.speaker_weight + self.quality_weight > 1:
            raise ValueError(f"speaker_weight ({self.speaker_weight}) and quality_weight ({self.quality_weight}) "
                             "must add up to at most 1")
        return self

    @property
    def needs_speaker(self) -> bool:
        """Whether the score depends on speaker similarity, so a request must carry a reference."""
        return self.speaker_weight > 0 or self.speaker_floor > -1

    @model_validator(mode="wrap")
    @classmethod
    def _one_message(cls, data: Any, handler: Any) -> Any:
        try:
            return handler(data)
        except ValidationError as exc:
            raise ValueError("invalid reward policy: " + "; ".join(_problem(e) for e in exc.errors())) from None

    def with_options(self, opts: RewardOptions | None) -> RewardPolicy:
        """This policy with the request's set fields applied; ValueError (one line) if the result is invalid."""
        overrides = opts.model_dump(exclude_none=True) if opts is not None else {}
        if not overrides:
            return self
        try:
            return RewardPolicy(**{**self.model_dump(), **overrides})
        except ValidationError as exc:
            raise ValueError("; ".join(validation_reasons(exc))) from None


def _bounds(info: FieldInfo) -> dict[str, float]:
    return {name: getattr(item, name) for item in info.metadata if isinstance(item, annotated_types.BaseMetadata)
            for name in ("gt", "ge", "lt", "le") if getattr(item, name, None) is not None}


def _expected(info: FieldInfo, b: dict[str, float]) -> str:
    """What a field takes, in words, from its declared type and bounds ``b``."""
    if typing.get_origin(info.annotation) is Literal:
        return "one of " + ", ".join(typing.get_args(info.annotation))
    if info.annotation is int:
        return f"an integer >= {b['ge']:g}"
    if "ge" in b and "le" in b:
        return f"in [{b['ge']:g}, {b['le']:g}]"
    low = f"> {b['gt']:g}" if "gt" in b else f">= {b['ge']:g}"
    return f"a finite number {low}"


def _problem(error: ErrorDetails) -> str:
    loc = error.get("loc") or ()
    name = str(loc[0]) if loc else ""
    if name not in RewardPolicy.model_fields:
        cause = (error.get("ctx") or {}).get("error")
        return str(cause) if cause is not None else error["msg"]
    value = error.get("input")
    info = RewardPolicy.model_fields[name]
    bound = _bounds(info)
    if error["type"] == "less_than_equal" and (info.annotation is int or "ge" not in bound):  # the upper end
        kind = "an integer" if info.annotation is int else "a finite number"
        return f"{name} must be {kind} <= {bound['le']:g}, got {value!r}"
    return f"{name} must be {_expected(info, bound)}, got {value!r}"


class RewardOptions(BaseModel):
    """Per-request reward shaping; every unset field takes the server's default."""

    # RewardPolicy's fields, all optional, with the same type aliases (bounds), less the server-only ones.
    model_config = ConfigDict(extra="forbid")

    formula: Formula | None = Field(None, description=_FORMULA_HELP)
    metric: Metric | None = Field(None, description=_METRIC_HELP)
    exp_k: _ExpK | None = None
    empty_transcript_penalty: _Share | None = None
    duration_ratio_min: _Positive | None = None
    duration_ratio_max: _Positive | None = None
    duration_penalty: _Share | None = None
    min_duration_s: _Seconds | None = None
    short_audio_penalty: _Share | None = None
    repeat_ngram_n: _NgramN | None = None
    repeat_penalty: _Share | None = None
    speaker_weight: _Share | None = None
    quality_weight: _Share | None = None
    speaker_floor: _Similarity | None = None
