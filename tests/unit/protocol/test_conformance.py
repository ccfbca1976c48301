"""The conformance vectors: every receiver (ours, and the JSON Schema files) agrees with the manifest."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from audio_reward.protocol import parse_json, validate_message
from audio_reward.protocol.schema import SCHEMA_DIR

EXAMPLES = Path(__file__).resolve().parents[3] / "audio_reward" / "protocol" / "examples"
MANIFEST = json.loads((EXAMPLES / "manifest.json").read_text())


def _load_schema(kind: str) -> dict:
    return json.loads((SCHEMA_DIR / f"{kind}.schema.json").read_text())


@pytest.mark.parametrize("case", MANIFEST, ids=[c["file"] for c in MANIFEST])
def test_vector_outcome(case: dict) -> None:
    obj = parse_json((EXAMPLES / case["file"]).read_bytes())
    kind, issues = validate_message(obj, case["kind"])
    assert kind == case["kind"]
    if case["valid"]:
        assert issues == []
    else:
        assert issues, "expected an error"
        assert issues[0].code == case["code"], [i.describe() for i in issues]
        assert all(i.path.startswith("$") and i.message for i in issues)


@pytest.mark.parametrize("case", [c for c in MANIFEST if c["valid"]], ids=lambda c: c["file"])
def test_valid_vectors_pass_the_json_schema(case: dict) -> None:
    """Clients in other languages validate with the schema files: valid vectors must pass them."""
    obj = json.loads((EXAMPLES / case["file"]).read_text())
    jsonschema.Draft202012Validator(_load_schema(case["kind"])).validate(obj)


SCHEMA_DETECTABLE = {
    "invalid/unknown_field.json", "invalid/sample_rate_zero.json", "invalid/sample_rate_10mhz.json",
    "invalid/sample_rate_float.json", "invalid/sample_rate_string.json", "invalid/metadata_nested.json",
    "invalid/prompt_not_string.json", "invalid/missing_prompt.json", "invalid/response_nested.json",
    "invalid/response_missing_score.json", "invalid/error_missing_retryable.json", "invalid/batch_empty.json",
    "invalid/bad_reward_options.json", "invalid/metadata_not_object.json",
}


@pytest.mark.parametrize("name", sorted(SCHEMA_DETECTABLE))
def test_structural_errors_fail_the_json_schema(name: str) -> None:
    case = next(c for c in MANIFEST if c["file"] == name)
    obj = json.loads((EXAMPLES / name).read_text())
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.Draft202012Validator(_load_schema(case["kind"])).validate(obj)


def test_every_error_code_is_covered() -> None:
    codes = {c["code"] for c in MANIFEST if c["code"]}
    assert {
        "unsupported_protocol_version", "invalid_base64", "invalid_audio_length", "num_samples_mismatch",
        "non_finite_audio", "empty_audio", "invalid_sample_rate", "audio_too_long", "invalid_metadata",
        "invalid_prompt", "unknown_field",
    } <= codes
