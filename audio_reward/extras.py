"""One-line hints naming the optional extra (and the pip command) a feature needs.

The package is installed from a checkout for now (it is not on PyPI yet), so
the command is the editable install with the extra.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Sequence


def install_command(extra: str) -> str:
    """The command that installs ``extra`` (or several, comma-separated), run in an audio-reward checkout."""
    return f"pip install -e '.[{extra}]'"


def install_hint(extra: str) -> str:
    """``run pip install -e '.[<extra>]' in your audio-reward checkout``: the tail of every install hint."""
    return f"run {install_command(extra)} in your audio-reward checkout"


def missing_extra_message(extras: str | Sequence[str], what: str, exc: ModuleNotFoundError | None = None) -> str:
    """``<what> needs the <extra> extra (no module 'x'): run pip install ... in your audio-reward checkout``.

    Several extras are named together (``the 'server' and 'base-model' extras``) with one command for all.
    """
    names = [extras] if isinstance(extras, str) else list(extras)
    quoted = " and ".join(f"'{name}'" for name in names)
    plural = "s" if len(names) > 1 else ""
    missing = f" (no module named {exc.name!r})" if exc is not None and exc.name else ""
    return f"{what} needs the {quoted} extra{plural}{missing}: {install_hint(','.join(names))}"


def is_missing_dependency(exc: ModuleNotFoundError) -> bool:
    """True when a third-party module is absent (not a broken import inside audio_reward itself)."""
    return bool(exc.name) and not str(exc.name).startswith("audio_reward")


def missing_modules(modules: Iterable[str]) -> list[str]:
    """The modules of ``modules`` that do not import here (each imported, so a broken install counts too)."""
    missing = []
    for module in modules:
        try:
            importlib.import_module(module)
        except ImportError:
            missing.append(module)
    return missing
