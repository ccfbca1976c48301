"""Every module, name and file the docs point at exists.

The docs name import paths (``from audio_reward.scorer_client import ScorerClient``,
``audio_reward.trainer_plugin.reward_fn.compute_score``) and files
(``tests/unit/scoring/test_scoring_rewards.py``, ``bench/load.py``).  A moved
module or file must take its docs along: this test imports each dotted name
and checks each path.  A name whose module needs an optional third-party
package that this environment lacks (verl in the main environment) is
skipped with that package named; a missing ``audio_reward`` module fails.
"""

from __future__ import annotations

import importlib
import re

import pytest

from tests.testkit.server import REPO_ROOT

DOCS = sorted([REPO_ROOT / "README.md", *(REPO_ROOT / "docs").glob("*.md"),
               *(REPO_ROOT / "audio_reward" / "trainer_plugin" / "recipes").glob("*/README.md")])

NOT_IN_THIS_REPO = {
    "docs/start/install.md": "verl-omni's install page, in its checkout",
    "bench/.gpu-assets": "the folder bench.engine_throughput prepare creates",
    **dict.fromkeys(("tests/pipelines/test_qwen3_tts_on_cpu.py", "tests/pipelines/test_qwen3_tts_package_on_cpu.py",
                     "tests/workers/rollout/rollout_vllm/test_qwen3_tts_rollout_on_cpu.py"),
                    "verl-omni's Qwen3-TTS contract test, in its checkout"),
}
"""Paths the docs name that are not files of this repository, and why."""

LOGGER_NAMES = {"audio_reward.access": "audio_reward.scorer_server.logs.ACCESS_LOGGER"}
"""Dotted names the docs show in log lines that are logger names, not imports: each is the value of the constant
named beside it, so a renamed logger still fails here."""

_DOTTED = re.compile(r"(?<![\w./+-])audio_reward(?:\.[A-Za-z_]\w*)+")
_FROM_IMPORT = re.compile(r"^\s*from (audio_reward(?:\.\w+)*) import ([\w, ]+)$", re.MULTILINE)
_PATH = re.compile(r"(?<![\w./-])((?:audio_reward|tests|bench|scripts|docs)/[\w./-]*\w)")


def _doc_text() -> list[tuple[str, str]]:
    return [(str(doc.relative_to(REPO_ROOT)), doc.read_text(encoding="utf-8")) for doc in DOCS]


def _dotted_names() -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    for doc, text in _doc_text():
        for name in _DOTTED.findall(text):
            found.setdefault(name, doc)
        for module, names in _FROM_IMPORT.findall(text):
            for attr in (n.strip() for n in names.split(",")):
                if attr:
                    found.setdefault(f"{module}.{attr}", doc)
    return sorted(found.items())


def _paths() -> list[tuple[str, str]]:
    found: dict[str, str] = {}
    for doc, text in _doc_text():
        for path in _PATH.findall(text):
            found.setdefault(path.split("::")[0], doc)
    return sorted(found.items())


def _resolve(dotted: str) -> None:
    """Import the longest module prefix of ``dotted``, then look up the rest as attributes."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module_name = ".".join(parts[:cut])
        try:
            obj = importlib.import_module(module_name)
        except ModuleNotFoundError as exc:
            if exc.name and not (exc.name == module_name or module_name.startswith(exc.name + ".")) \
                    and not exc.name.startswith("audio_reward"):
                pytest.skip(f"{module_name} needs {exc.name}, not installed in this environment")
            continue
        for attr in parts[cut:]:
            obj = getattr(obj, attr)
        return
    raise AssertionError(f"no module of {dotted} imports")


def test_the_docs_name_modules_and_files() -> None:
    assert len(_dotted_names()) >= 10 and len(_paths()) >= 10


@pytest.mark.parametrize(("dotted", "doc"), _dotted_names())
def test_every_documented_import_path_imports(dotted: str, doc: str) -> None:
    if dotted in LOGGER_NAMES:
        module, _, constant = LOGGER_NAMES[dotted].rpartition(".")
        assert getattr(importlib.import_module(module), constant) == dotted, f"{doc} shows logger {dotted}"
        return
    try:
        _resolve(dotted)
    except AttributeError as exc:
        raise AssertionError(f"{doc} names {dotted}, which does not exist: {exc}") from None


@pytest.mark.parametrize(("path", "doc"), _paths())
def test_every_documented_file_exists(path: str, doc: str) -> None:
    if path in NOT_IN_THIS_REPO:
        pytest.skip(NOT_IN_THIS_REPO[path])
    target = REPO_ROOT / path
    assert target.exists() or any(REPO_ROOT.glob(path)), f"{doc} names {path}, which does not exist"


def test_the_readmes_command_list_names_every_command() -> None:
    from audio_reward.cli import COMMANDS

    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^    audio-reward ([a-z-]+)", text.split("## Command line", 1)[1], re.MULTILINE))
    assert set(COMMANDS) <= listed, f"README.md's command list lacks {sorted(set(COMMANDS) - listed)}"
