"""One-line hints naming the optional extra (and the pip command) a feature needs.

The package is installed from a checkout for now (it is not on PyPI yet), so
the command is the editable install with the extra.
"""

from __future__ import annotations


def install_command(extra: str) -> str:
    """The command that installs ``extra``, run in an audio-reward checkout."""
    return f"pip install -e '.[{extra}]'"


def missing_extra_message(extra: str, what: str, exc: ModuleNotFoundError | None = None) -> str:
    """``<what> needs the <extra> extra (no module 'x'): run pip install ... in your audio-reward checkout``."""
    missing = f" (no module named {exc.name!r})" if exc is not None and exc.name else ""
    return f"{what} needs the '{extra}' extra{missing}: run {install_command(extra)} in your audio-reward checkout"


def is_missing_dependency(exc: ModuleNotFoundError) -> bool:
    """True when a third-party module is absent (not a broken import inside audio_reward itself)."""
    return bool(exc.name) and not str(exc.name).startswith("audio_reward")
