"""``scripts/make_protocol_examples.py`` regenerates the committed conformance vectors byte for byte."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.testkit.server import REPO_ROOT

EXAMPLES = REPO_ROOT / "audio_reward" / "protocol" / "examples"


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.json"))}


def test_regenerated_examples_equal_the_committed_ones(tmp_path: Path) -> None:
    for run in ("first", "second"):  # twice: nothing in the output may depend on the time or the run
        subprocess.run([sys.executable, str(REPO_ROOT / "scripts" / "make_protocol_examples.py"),
                        "--out", str(tmp_path / run)], check=True, cwd=REPO_ROOT)
    committed, regenerated = _files(EXAMPLES), _files(tmp_path / "first")
    assert regenerated == _files(tmp_path / "second")
    assert set(regenerated) == set(committed)
    drifted = [name for name in committed if committed[name] != regenerated[name]]
    assert not drifted, f"run `python scripts/make_protocol_examples.py` and commit: {drifted} differ"
