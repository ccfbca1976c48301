"""The committed JSON Schema files equal what the models generate now."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from audio_reward.protocol.models import MESSAGES
from audio_reward.protocol.reports import REPORTS
from audio_reward.protocol.schema import SCHEMA_DIR, generate_schemas


def test_committed_schemas_match_models() -> None:
    generated = generate_schemas()
    committed = {p.name: p.read_text(encoding="utf-8") for p in SCHEMA_DIR.glob("*.schema.json")}
    assert set(committed) == set(generated) == {f"{k}.schema.json" for k in {**MESSAGES, **REPORTS}}
    stale = [name for name, text in generated.items() if committed[name] != text]
    assert not stale, f"regenerate with `audio-reward schema --out {SCHEMA_DIR}`: {stale} drifted"


def test_schema_command_writes_the_same_files(tmp_path: Path) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "audio_reward.cli", "schema", "--out", str(tmp_path)],
        capture_output=True, text=True, check=True,
    )
    assert len(out.stdout.split()) == len(MESSAGES) + len(REPORTS)
    for path in tmp_path.iterdir():
        assert path.read_text(encoding="utf-8") == (SCHEMA_DIR / path.name).read_text(encoding="utf-8")
