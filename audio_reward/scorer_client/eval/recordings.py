"""Which file is a run's recording of an utterance, checked before a report shows it.

``eval`` records, per run, where the manifest's audio is (absolute, and
relative to the run folder, so a run copied together with its audio still
finds it) and, per utterance, the SHA-256 of the file it scored.  A report
shows a recording only when a file at one of those places has that hash: a
file that is missing, or was replaced after scoring, is named in the report
instead, never swapped for another file that happens to have the same name.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HASH_KEY = "audio_sha256"
"""The row field holding the SHA-256 (hex) of the audio file as it was scored."""
ROOT_KEY = "audio_root"
"""The summary field holding the absolute folder the manifest's audio paths are relative to."""
ROOT_FROM_RUN_KEY = "audio_root_from_run"
"""The same folder, relative to the run's own folder."""


def file_sha256(path: Path) -> str:
    """The SHA-256 of a file's bytes, as hex."""
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def audio_location(audio_root: Path, run_dir: Path) -> dict[str, str]:
    """The summary fields that say where a run's audio is: absolute, and relative to the run folder."""
    root = audio_root.resolve()
    return {ROOT_KEY: str(root), ROOT_FROM_RUN_KEY: os.path.relpath(root, run_dir.resolve())}


@dataclass
class RunAudio:
    """Where one run's recordings are; collects the ones a report could not show as that run's own."""

    name: str
    roots: tuple[Path, ...]
    problems: list[str] = field(default_factory=list)
    _found: dict[str, Path | str] = field(default_factory=dict, repr=False)

    @classmethod
    def of_run(cls, name: str, run_dir: Path, summary: dict[str, Any]) -> RunAudio:
        """The places a finished run's ``summary.json`` names: relative to the run folder first, then absolute."""
        roots: list[str] = []
        relative, absolute = summary.get(ROOT_FROM_RUN_KEY), summary.get(ROOT_KEY)
        if isinstance(relative, str):
            roots.append(os.path.join(run_dir, relative))
        if isinstance(absolute, str) and os.path.isabs(absolute):
            roots.append(absolute)
        unique = dict.fromkeys(os.path.normpath(os.path.abspath(r)) for r in roots)
        return cls(name, tuple(Path(r) for r in unique))

    def recording(self, row: dict[str, Any]) -> Path | str:
        """The file this run scored for ``row``, verified by its hash; else a sentence naming the file and why not.

        Every sentence returned is also kept in :attr:`problems` (once per file).
        """
        audio = row.get("audio")
        if not isinstance(audio, str) or not audio:
            return ""
        key = f"{audio}\0{row.get(HASH_KEY)}"
        if key not in self._found:
            self._found[key] = self._locate(audio, row.get(HASH_KEY))
            if isinstance(self._found[key], str):
                self.problems.append(str(self._found[key]))
        return self._found[key]

    def _locate(self, audio: str, expected: Any) -> Path | str:
        if not self.roots:
            return f"{self.name}: {audio} not shown: the run does not record where its audio is"
        if not isinstance(expected, str):
            return (f"{self.name}: {audio} not shown: the run recorded no content hash to check it by "
                    "(scored by an older audio-reward; run eval into a new --out to get one)")
        present = [p for p in (root / audio for root in self.roots) if p.is_file()]
        for path in present:
            if file_sha256(path) == expected:
                return path.resolve()
        if present:
            return f"{self.name}: {audio} not shown: {present[0]} is not the file the run scored (its content changed)"
        return f"{self.name}: {audio} not shown: not found in {' or '.join(str(r) for r in self.roots)}"
