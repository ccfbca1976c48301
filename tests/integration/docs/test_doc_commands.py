"""Every command block in README.md and docs/ is run here, tested elsewhere, or says why it cannot run on a CPU.

The list of how each block is covered is ``tests/integration/docs/doc_commands.py``
(read its docstring to add an entry).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import soundfile as sf

from tests.testkit.server import REPO_ROOT

from .doc_commands import ENTRIES, Covered, Run, Skip

COMMAND_LANGS = {"", "bash", "sh", "shell", "console", "indented"}
"""Fence languages that hold commands; python and json blocks are code and examples, not commands."""
FENCE = re.compile(r"^\s*(```+|~~~+)\s*([\w+-]*)")
LOCAL_SCORER = re.compile(r"(https?://)?(127\.0\.0\.1|localhost|scorer):8000")


@dataclass(frozen=True)
class Block:
    doc: str
    line: int
    lang: str
    text: str

    @property
    def key(self) -> str:
        first = next((x for x in self.text.splitlines() if x.strip() and not x.lstrip().startswith("#")), "")
        return f"{self.doc}: {first.strip()}"


def command_blocks() -> list[Block]:
    """Fenced blocks in a command language, and blocks indented by four spaces after a blank line."""
    blocks = []
    for path in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        doc, lines = str(path.relative_to(REPO_ROOT)), path.read_text(encoding="utf-8").splitlines()
        i, blank_before = 0, True
        while i < len(lines):
            fence = FENCE.match(lines[i])
            if fence:
                start, body = i, []
                i += 1
                while i < len(lines) and not lines[i].strip().startswith(fence.group(1)):
                    body.append(lines[i])
                    i += 1
                blocks.append(Block(doc, start + 1, fence.group(2).lower(), "\n".join(body)))
                i, blank_before = i + 1, False
            elif blank_before and lines[i].startswith("    ") and lines[i].strip():
                start, body = i, []
                while i < len(lines) and (lines[i].startswith("    ") or not lines[i].strip()):
                    body.append(lines[i][4:])
                    i += 1
                blocks.append(Block(doc, start + 1, "indented", "\n".join(body).rstrip()))
                blank_before = False
            else:
                blank_before = not lines[i].strip()
                i += 1
    return [b for b in blocks if b.lang in COMMAND_LANGS]


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


def _fixture(name: str, folder: Path, url: str | None) -> None:
    from tests.testkit.speech import synth_speech

    if name in ("speech.wav", "hello.wav", "take2.flac"):
        text = "Hello world." if name != "speech.wav" else "The quick brown fox jumps over the lazy dog."
        audio, rate = synth_speech(text)
        sf.write(folder / name, audio, rate)
    elif name == "manifest.jsonl":
        (folder / "wavs").mkdir(exist_ok=True)
        rows = []
        for i, text in enumerate(["Hello world.", "Good morning everyone."]):
            audio, rate = synth_speech(text)
            sf.write(folder / "wavs" / f"{i:04d}.wav", audio, rate)
            rows.append({"audio": f"wavs/{i:04d}.wav", "text": text, "language": "en", "id": f"{i:04d}"})
        (folder / name).write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    elif name in ("eval-base", "eval-trained"):  # finished eval runs, as --compare expects
        if not (folder / "manifest.jsonl").exists():
            _fixture("manifest.jsonl", folder, url)
        assert url is not None
        subprocess.run(
            [
                sys.executable,
                "-m",
                "audio_reward.cli",
                "eval",
                "manifest.jsonl",
                "--out",
                name,
                "--url",
                url,
                "--no-progress",
            ],
            cwd=folder,
            check=True,
            capture_output=True,
        )
    else:
        raise AssertionError(f"unknown fixture {name!r}: add it to _fixture in {__file__}")


@pytest.mark.parametrize("key", [k for k, e in ENTRIES.items() if isinstance(e, Run)])
def test_run_block(key: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    entry = ENTRIES[key]
    assert isinstance(entry, Run)
    block = next((b for b in BLOCKS if b.key == key), None)
    assert block is not None, f"no doc block has the key {key!r}"
    url = request.getfixturevalue("scorer_url") if entry.scorer else None
    for name in entry.files:
        _fixture(name, tmp_path, url)
    text = block.text
    if block.lang == "console":  # a session: the commands are the "$ " lines, the rest is their output
        text = "\n".join(line[2:] for line in text.splitlines() if line.startswith("$ "))
    script = text.replace(".venv/bin/", "")
    if url is not None:
        script = LOCAL_SCORER.sub(url, script)
    bindir = str(Path(sys.executable).parent)
    env = {**os.environ, "PATH": bindir + os.pathsep + os.environ.get("PATH", "")}
    env.pop("AUDIO_REWARD_URL", None)
    proc = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=entry.timeout_s,
    )
    assert proc.returncode == 0, (
        f"{block.doc}:{block.line} exited {proc.returncode}\n{script}\n{proc.stdout}\n{proc.stderr}"
    )
    assert proc.stdout.strip(), f"{block.doc}:{block.line} printed nothing"
