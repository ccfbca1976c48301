"""Flags generated from a settings model: names, help, defaults, nesting, booleans, skipped fields."""

from __future__ import annotations

import argparse
from typing import Literal

from pydantic import BaseModel, Field

from audio_reward.settings_flags import add_flags, flags_for, values_from_args


class Inner(BaseModel):
    rate: float = Field(0.5, description="A rate.")
    mode: Literal["a", "b"] = Field("a", description="A mode.")


class Outer(BaseModel):
    max_items: int = Field(4, description="Most items.")
    label: str | None = Field(None, description="A label.")
    verbose: bool = Field(False, description="Talk more.")
    secret: str | None = Field(None, description="Never a flag.")
    inner: Inner = Field(default_factory=Inner)


def _parser() -> tuple[argparse.ArgumentParser, list]:
    flags = flags_for(Outer, skip=("secret",))
    parser = argparse.ArgumentParser()
    add_flags(parser, flags)
    return parser, flags


def test_one_flag_per_field_nested_fields_prefixed_and_skipped_ones_left_out() -> None:
    _, flags = _parser()
    assert [f.option for f in flags] == ["--max-items", "--label", "--verbose", "--inner-rate", "--inner-mode"]
    helps = {f.option: f.help for f in flags}
    assert helps["--max-items"] == "Most items (default: 4)"  # the description, and the model's default
    assert helps["--inner-mode"] == "A mode (a, b) (default: a)"


def test_only_the_flags_given_are_returned_typed_and_nested() -> None:
    parser, flags = _parser()
    assert values_from_args(parser.parse_args([]), flags) == {}
    args = parser.parse_args(["--max-items", "7", "--no-verbose", "--inner-rate", "0.25", "--label", "x"])
    values = values_from_args(args, flags)
    assert values == {"max_items": 7, "verbose": False, "label": "x", "inner": {"rate": 0.25}}
    assert Outer(**values).inner == Inner(rate=0.25)


def test_a_required_field_has_no_default_in_its_help() -> None:
    class Required(BaseModel):
        url: str = Field(description="Where to send.")

    (flag,) = flags_for(Required)
    assert flag.help == "Where to send"  # pydantic keeps PydanticUndefined as a required field's default
