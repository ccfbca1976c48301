"""Command-line flags generated from a pydantic settings model.

One flag per field, named after it (``max_batch_size`` → ``--max-batch-size``;
a nested model's fields take its name as a prefix: ``reward.exp_k`` →
``--reward-exp-k``), with the field's description as help and the model's
default shown in it.  A flag left out is ``None`` and sets nothing, so the
model's own precedence (environment, presets, defaults) decides; only the
flags given reach the model, through :func:`values_from_args`.

Booleans get ``--flag`` / ``--no-flag``; ``int`` and ``float`` fields are
converted by argparse; everything else is passed as text for the model to
validate.  Fields whose values cannot be spelled as one word (dicts, secrets)
are left to the caller, which names them in ``skip``.  Only argparse and
pydantic are imported, so every command line of the package can use it.
"""

from __future__ import annotations

import argparse
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Union

from pydantic import BaseModel
from pydantic.fields import FieldInfo

__all__ = ["Flag", "add_flags", "dotted_items", "flags_for", "one_line", "set_path", "values_from_args"]


@dataclass(frozen=True)
class Flag:
    """One generated flag: the field path it sets and its argparse options."""

    path: tuple[str, ...]
    option: str
    kind: Callable[[str], Any]
    help: str
    boolean: bool = False

    @property
    def dest(self) -> str:
        """The argparse destination: the field's dotted path."""
        return ".".join(self.path)


def _unwrap(annotation: Any) -> Any:
    """``X | None`` → ``X``; other annotations unchanged."""
    if typing.get_origin(annotation) in (Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return annotation


def _help(info: FieldInfo, annotation: Any) -> str:
    text = (info.description or "").rstrip(".")
    if typing.get_origin(annotation) is Literal:
        text += f" ({', '.join(str(a) for a in typing.get_args(annotation))})"
    if not info.is_required() and info.default_factory is None and info.default is not None:
        text += f" (default: {info.default})"
    return text.replace("%", "%%")


def flags_for(model: type[BaseModel], *, skip: Iterable[str] = (), prefix: tuple[str, ...] = ()) -> list[Flag]:
    """The flags of ``model``'s fields, nested models flattened; ``skip`` names dotted field paths to leave out."""
    skipped = set(skip)
    flags: list[Flag] = []
    for name, info in model.model_fields.items():
        path = (*prefix, name)
        if ".".join(path) in skipped:
            continue
        annotation = _unwrap(info.annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            flags += flags_for(annotation, skip=skipped, prefix=path)
            continue
        option = "--" + "-".join(path).replace("_", "-")
        kind = annotation if annotation in (int, float) else str  # argparse converts numbers; the model the rest
        flags.append(Flag(path, option, kind, _help(info, annotation), boolean=annotation is bool))
    return flags


def add_flags(parser: argparse.ArgumentParser | argparse._ArgumentGroup, flags: Iterable[Flag]) -> None:
    """Add ``flags`` to ``parser``; each defaults to None (not given)."""
    for flag in flags:
        how: dict[str, Any] = ({"action": argparse.BooleanOptionalAction} if flag.boolean
                               else {"type": flag.kind, "metavar": flag.path[-1].upper()})
        parser.add_argument(flag.option, dest=flag.dest, default=None, help=flag.help, **how)


def values_from_args(args: argparse.Namespace, flags: Iterable[Flag]) -> dict[str, Any]:
    """The values of the flags given on the command line, nested like the model's fields."""
    out: dict[str, Any] = {}
    for flag in flags:
        if (value := getattr(args, flag.dest, None)) is not None:
            set_path(out, flag.path, value)
    return out


def set_path(out: dict[str, Any], path: Sequence[str], value: Any) -> None:
    """``out[path[0]][path[1]]... = value``, making the nested dicts on the way."""
    for part in path[:-1]:
        out = out.setdefault(part, {})
    out[path[-1]] = value


def dotted_items(values: Mapping[str, Any], prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Nested settings as sorted ``(dotted.name, value)`` pairs: ``{"reward": {"exp_k": 2}}`` → ``reward.exp_k``.

    An empty mapping is a value of its own.
    """
    for name, value in sorted(values.items()):
        if isinstance(value, Mapping) and value:
            yield from dotted_items(value, f"{prefix}{name}.")
        else:
            yield f"{prefix}{name}", value


def one_line(exc: Exception, describe: Callable[[tuple[str, ...], str, Any], str | None] | None = None) -> str:
    """A settings error as one line a command can print: each pydantic error as ``field: reason``.

    pydantic's own text spans several lines and ends each error with a link to its documentation.
    ``describe(loc, reason, input)`` may word an error itself (None: the default wording).
    """
    errors = getattr(exc, "errors", None)
    if not callable(errors):
        return " ".join(str(exc).split())
    parts = []
    for error in errors():
        loc = tuple(str(p) for p in error.get("loc", ()))
        reason = str(error.get("msg", "")).removeprefix("Value error, ")
        worded = describe(loc, reason, error.get("input")) if describe is not None else None
        parts.append(worded if worded is not None else f"{'.'.join(loc)}: {reason}" if loc else reason)
    return "; ".join(parts)
