"""Inputs that cannot be scored, with a stable code and the input field they concern."""

from __future__ import annotations

__all__ = ["EmptyReferenceError", "ScoringError", "UnsupportedLanguageError"]


class ScoringError(ValueError):
    """A text or language the scoring rules refuse.

    ``code`` is stable (the server answers it as a 400 error code, the
    ``error-rate`` command writes it per line); ``field`` names the input
    concerned, as the caller calls it (``prompt`` on the wire, ``reference`` in
    the library and the command).
    """

    code = "scoring_error"

    def __init__(self, message: str, *, field: str) -> None:
        super().__init__(message)
        self.message = message
        self.field = field


class EmptyReferenceError(ScoringError):
    """The reference is empty, or has nothing left once normalized (``"..."``)."""

    code = "empty_reference"


class UnsupportedLanguageError(ScoringError):
    """The normalizer has no rules for the language (``seed-tts-eval`` knows en and zh only)."""

    code = "unsupported_language"
