"""``audio-reward validate``: exit 0 valid, 1 invalid, 2 unreadable; errors with their JSON paths."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[3] / "audio_reward" / "protocol" / "examples"


def run(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "audio_reward.cli", "validate", *args],
                          input=stdin, capture_output=True, timeout=60)


def test_valid_request_and_detected_kinds() -> None:
    for name, kind in [("verl_omni_v1", "score_request"), ("batch_request", "batch_request"),
                       ("score_response", "score_response"), ("error", "error"), ("batch_response", "batch_response")]:
        out = run(str(EXAMPLES / "valid" / f"{name}.json"))
        assert out.returncode == 0, out.stdout
        assert out.stdout.decode().strip() == f"OK ({kind})"


def test_invalid_prints_every_error_with_its_path() -> None:
    body = (
        (EXAMPLES / "valid" / "verl_omni_v1.json")
        .read_text()
        .replace('"sample_rate": 16000', '"sample_rate": 0, "x": 1')
    )
    out = run("-", stdin=body.encode())
    text = out.stdout.decode()
    assert out.returncode == 1
    assert "$.sample_rate:" in text and "[invalid_sample_rate]" in text
    assert "$.x: unknown field 'x' [unknown_field]" in text


def test_kind_flag_overrides_detection() -> None:
    out = run("--kind", "score_response", str(EXAMPLES / "valid" / "verl_omni_v1.json"))
    assert out.returncode == 1 and "score" in out.stdout.decode()


def test_unreadable_input_exits_2(tmp_path: Path) -> None:
    assert run(str(tmp_path / "missing.json")).returncode == 2
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    out = run(str(bad))
    assert out.returncode == 2 and "malformed_json" not in out.stdout.decode()
    assert "not valid JSON" in out.stderr.decode()
