"""The command blocks of README.md and docs/*.md, their fixture files, and running one block with bash.

``tests/integration/docs/test_doc_commands.py`` runs each ``Run`` block in the full environment;
``tests/environments`` runs each one again in the fresh environment its entry names (the docs' own install
lines), where the same block must work as written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import soundfile as sf

from tests.testkit.server import REPO_ROOT

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

    def script(self) -> str:
        """The block as a bash script; in a ``console`` block only the ``$ `` lines are commands."""
        if self.lang == "console":
            return "\n".join(line[2:] for line in self.text.splitlines() if line.startswith("$ "))
        return self.text


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


def make_fixture(name: str, folder: Path, url: str | None, bindir: Path) -> None:
    """Create the fixture file ``name`` in ``folder``; ``bindir`` holds the environment's ``audio-reward``."""
    from tests.testkit.speech import synth_speech

    if name == "examples":  # the checkout's own example clip, as the README's lines name it
        shutil.copytree(REPO_ROOT / "examples", folder / "examples", dirs_exist_ok=True)
    elif name in ("speech.wav", "hello.wav", "take2.flac"):
        text = "The quick brown fox jumps over the lazy dog." if name == "speech.wav" else "Hello world."
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
            make_fixture("manifest.jsonl", folder, url, bindir)
        assert url is not None
        subprocess.run(
            [str(bindir / "audio-reward"), "eval", "manifest.jsonl", "--out", name, "--url", url, "--no-progress"],
            cwd=folder, check=True, capture_output=True,
        )
    else:
        raise AssertionError(f"unknown fixture {name!r}: add it to make_fixture in {__file__}")


def run_block(block: Block, folder: Path, *, bindir: Path, url: str | None,
              timeout_s: float) -> subprocess.CompletedProcess[str]:
    """Run ``block`` with bash in ``folder``, ``.venv/bin/`` meaning ``bindir`` and the docs' scorer ``url``."""
    script = block.script().replace(".venv/bin/", "")
    if url is not None:
        script = LOCAL_SCORER.sub(url, script)
    env = {**os.environ, "PATH": str(bindir) + os.pathsep + os.environ.get("PATH", "")}
    env.pop("AUDIO_REWARD_URL", None)
    return subprocess.run(["bash", "-euo", "pipefail", "-c", script], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=timeout_s)
