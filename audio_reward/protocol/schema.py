"""JSON Schema files generated from the protocol models.

The committed files under ``schemas/v1/`` are the contract for clients in
other languages; a test fails when they drift from the models.
"""

from __future__ import annotations

import json
from pathlib import Path

from .models import MESSAGES
from .reports import REPORTS
from .version import PROTOCOL_VERSION

SCHEMA_DIR = Path(__file__).parent / "schemas" / f"v{PROTOCOL_VERSION}"
_BASE_ID = f"https://audio-reward.dev/schemas/v{PROTOCOL_VERSION}"


def generate_schemas() -> dict[str, str]:
    """Schema file name → file text, for every wire message and every evaluation file format."""
    out = {}
    for kind, model in {**MESSAGES, **REPORTS}.items():
        schema = {
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": f"{_BASE_ID}/{kind}.schema.json",
            **model.model_json_schema(mode="validation"),
        }
        out[f"{kind}.schema.json"] = json.dumps(schema, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    return out


def write_schemas(directory: Path) -> list[Path]:
    """Write every message's JSON Schema into ``directory`` (created if missing); the paths written."""
    directory.mkdir(parents=True, exist_ok=True)
    texts = {directory / name: text for name, text in generate_schemas().items()}
    for path, text in texts.items():
        path.write_text(text, encoding="utf-8")
    return list(texts)
