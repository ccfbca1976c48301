"""Typed errors of the protocol layer.

Every validation failure carries a stable machine-readable ``code``, a message
naming the field, and the JSON path of the offending value.  The server turns
them into ``{"error": {"code", "message", "retryable"}}`` bodies.
"""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import ValidationError
from pydantic_core import ErrorDetails


@dataclass(frozen=True)
class Issue:
    """One problem found in a payload."""

    code: str
    message: str
    path: str = "$"

    def describe(self) -> str:
        """The issue as one line: where, then what."""
        return f"{self.path}: {self.message}"


class ProtocolError(Exception):
    """A payload that does not follow the protocol; holds every issue found."""

    def __init__(self, issues: list[Issue]) -> None:
        if not issues:
            raise ValueError("ProtocolError needs at least one issue")
        self.issues = list(issues)
        super().__init__("; ".join(i.describe() for i in self.issues))

    @classmethod
    def single(cls, code: str, message: str, path: str = "$") -> ProtocolError:
        """An error with one issue."""
        return cls([Issue(code, message, path)])

    @property
    def code(self) -> str:
        """The code of the first issue: what the server reports."""
        return self.issues[0].code

    @property
    def message(self) -> str:
        """Every issue, one after the other: what the server puts in the error body."""
        return str(self)


class Refusal(ValueError):
    """A protocol rule a model's validator enforces: pydantic carries it, with its wire ``code`` and the
    ``field`` it names (none: the object itself), to :func:`~audio_reward.protocol.issues_from_pydantic`."""

    def __init__(self, code: str, message: str, field: str = "") -> None:
        super().__init__(message)
        self.code = code
        self.field = field


def validation_reasons(exc: ValidationError) -> list[str]:
    """One line per problem in a pydantic error: a validator's own message as it is, else ``field: message``."""
    return [_reason(error) for error in exc.errors(include_url=False)]


def _reason(error: ErrorDetails) -> str:
    cause = (error.get("ctx") or {}).get("error")
    if isinstance(cause, ValueError):
        return str(cause)
    where = ".".join(str(part) for part in error.get("loc", ()))
    return f"{where}: {error['msg']}" if where else str(error["msg"])
