"""Every command block in README.md and docs/ is run here, tested elsewhere, or says why it cannot run on a CPU.

The list of how each block is covered is ``tests/integration/docs/doc_commands.py``
(read its docstring to add an entry).
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from tests.testkit.doc_blocks import command_blocks, make_fixture, run_block
from tests.testkit.server import REPO_ROOT

from .doc_commands import ENTRIES, Covered, Run, Skip

BLOCKS = command_blocks()


def test_every_command_block_has_an_entry() -> None:
    missing = [b for b in BLOCKS if b.key not in ENTRIES]
    advice = "\n".join(
        f"  {b.doc}:{b.line}: add to ENTRIES in tests/integration/docs/doc_commands.py\n"
        f"      {b.key!r}: Run(...) | Covered('tests/...::test_name') | Skip('why it cannot run on a CPU machine'),"
        for b in missing)
    assert not missing, f"{len(missing)} command block(s) of the docs have no test entry:\n{advice}"
    stale = sorted(set(ENTRIES) - {b.key for b in BLOCKS})
    assert not stale, (
        f"entries in tests/integration/docs/doc_commands.py for blocks no doc has any more (remove them): {stale}"
    )


@pytest.mark.parametrize("key", [k for k, e in ENTRIES.items() if isinstance(e, Covered)])
def test_named_equivalent_tests_exist(key: str) -> None:
    entry = ENTRIES[key]
    assert isinstance(entry, Covered) and entry.tests
    for test in entry.tests:
        path, _, name = test.partition("::")
        source = REPO_ROOT / path
        assert source.is_file(), f"{key}: {path} does not exist"
        if name:
            assert re.search(rf"^(async )?def {re.escape(name)}\b", source.read_text(encoding="utf-8"), re.M), (
                f"{key}: {path} defines no {name}"
            )


def test_skips_say_why() -> None:
    for key, entry in ENTRIES.items():
        if isinstance(entry, Skip):
            assert len(entry.reason) > 10, f"{key}: say why this block cannot run on a CPU machine"


# ---------------------------------------------------------------- running blocks


@pytest.mark.parametrize("key", [k for k, e in ENTRIES.items() if isinstance(e, Run)])
def test_run_block(key: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    entry = ENTRIES[key]
    assert isinstance(entry, Run)
    block = next((b for b in BLOCKS if b.key == key), None)
    assert block is not None, f"no doc block has the key {key!r}"
    url = request.getfixturevalue("scorer_url") if entry.scorer else None
    bindir = Path(sys.executable).parent
    for name in entry.files:
        make_fixture(name, tmp_path, url, bindir)
    proc = run_block(block, tmp_path, bindir=bindir, url=url, timeout_s=entry.timeout_s)
    assert proc.returncode == 0, (
        f"{block.doc}:{block.line} exited {proc.returncode}\n{block.script()}\n{proc.stdout}\n{proc.stderr}"
    )
    assert proc.stdout.strip(), f"{block.doc}:{block.line} printed nothing"


ENVIRONMENT_NAMES = re.compile(
    r"\b(client|server|scorer|eval|dev|trainer|TTS[ -]model|TTS[ -]tools|vLLM|GPU|any|every|each|fresh)\s+"
    r"(environments?|machines?)\b",
    re.IGNORECASE,
)
"""How the docs name where a command runs: the README's environments (client, server, eval, dev), the trainer's,
the TTS model's, a GPU machine; or any environment, or a fresh machine (a command that builds its own)."""


@pytest.mark.parametrize("key", [k for k, e in ENTRIES.items() if not isinstance(e, Skip) or e.command])
def test_a_command_block_names_the_environment_it_runs_in(key: str) -> None:
    block = next(b for b in BLOCKS if b.key == key)
    lines = (REPO_ROOT / block.doc).read_text(encoding="utf-8").splitlines()
    before = "\n".join(lines[max(0, block.line - 13):block.line - 1])
    assert ENVIRONMENT_NAMES.search(before + "\n" + block.text), (
        f"{block.doc}:{block.line}: say in the lines before this block which environment it runs in "
        f"(\"in the server environment\"...)"
    )
