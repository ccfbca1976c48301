"""Wire comparison: the same requests to this checkout's server and another checkout's, answers compared byte
for byte.  Run it after a change meant to leave behaviour alone (a refactoring):

    git worktree add /tmp/before HEAD~1
    PYTHONPATH=. .venv/bin/python scripts/wire_compare.py --baseline /tmp/before [server flags...]

Both servers run the embedded Whisper (or what the server flags say, e.g. ``--quality-model dnsmos``) on
loopback.  The requests: every protocol example (valid and invalid, as a score, and as a batch or speaker
registration where it is one), the example speech as JSON, as a form, to ``/score`` and in a mixed batch,
the OpenAI route in each response format and with bad fields, malformed, mistyped and oversized bodies,
and the GET endpoints (``/v1/info``, ``/openapi.json``, ``/v1/models``, health, docs, a missing path).
What differs between two runs of one server is masked (generated request ids, ``uptime_s``, a model
card's ``created``, ``/v1/info``'s measured throughput); status, ``content-type``, ``retry-after`` and the
body must be equal.  Exit status 1 when any answer differs.
"""

from __future__ import annotations

import argparse
import base64
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.testkit.server import running_server, settings_to_flags  # noqa: E402

EXAMPLES = ROOT / "audio_reward" / "protocol" / "examples"
JSON = {"content-type": "application/json"}
MASKS = [
    (re.compile(rb'"request_id":"[0-9a-f]{32}(-[0-9]+)?"'), b'"request_id":"generated"'),
    (re.compile(rb'"uptime_s":[0-9.eE+-]+'), b'"uptime_s":0'),
    (re.compile(rb'"created":[0-9]+'), b'"created":0'),
    # /v1/info's measured speed: the engine's busy time differs from run to run
    (re.compile(rb'"(audio_seconds_per_second|busy_seconds)":[0-9.eE+-]+'), rb'"\1":0'),
]
HEADERS = ("content-type", "retry-after", "www-authenticate", "allow")
Request = tuple[str, str, str, dict[str, Any]]


def _examples() -> Iterator[Request]:
    for path in sorted(EXAMPLES.glob("*/*.json")):
        name, body = f"{path.parent.name}/{path.name}", path.read_bytes()
        yield name, "POST", "/v1/score", {"content": body, "headers": JSON}
        if "batch" in path.name:
            yield f"{name} (batch)", "POST", "/v1/score/batch", {"content": body, "headers": JSON}
        if "speaker_request" in path.name:
            yield f"{name} (speaker)", "POST", "/v1/speakers", {"content": body, "headers": JSON}


def _speech() -> Iterator[Request]:
    wav = (ROOT / "examples" / "speech.wav").read_bytes()
    text = (ROOT / "examples" / "speech.txt").read_text(encoding="utf-8").strip()
    item = {"protocol_version": "1", "prompt": text, "audio_file_base64": base64.b64encode(wav).decode(),
            "request_id": "wire-1"}
    body = json.dumps(item).encode()
    upload = {"file": ("speech.wav", wav, "audio/wav")}
    yield "speech (JSON)", "POST", "/v1/score", {"content": body, "headers": JSON}
    yield "speech (/score)", "POST", "/score", {"content": body, "headers": JSON}
    yield "speech (form)", "POST", "/v1/score", {"files": upload, "data": {"text": text}}
    mixed = {"protocol_version": "1", "items": [item, {"prompt": "no audio"}]}
    yield "speech and a bad item (batch)", "POST", "/v1/score/batch", {"content": json.dumps(mixed), "headers": JSON}
    for fmt in ("json", "text", "verbose_json", "srt", "vtt"):
        yield f"OpenAI {fmt}", "POST", "/v1/audio/transcriptions", {"files": upload, "data": {"response_format": fmt}}
    yield "OpenAI unknown model", "POST", "/v1/audio/transcriptions", {"files": upload, "data": {"model": "nope"}}
    yield "OpenAI without a file", "POST", "/v1/audio/transcriptions", {"data": {"model": "x"}}


def _malformed() -> Iterator[Request]:
    yield "malformed JSON", "POST", "/v1/score", {"content": b"{not json", "headers": JSON}
    yield "text body", "POST", "/v1/score", {"content": b"abc", "headers": {"content-type": "text/plain"}}
    yield "oversized body", "POST", "/v1/score", {"content": b"{" + b" " * (70 << 20) + b"}", "headers": JSON}
    for path in ("/v1/info", "/openapi.json", "/v1/models", "/healthz", "/readyz", "/docs", "/missing"):
        yield f"GET {path}", "GET", path, {}


def answer(client: httpx.Client, base: str, method: str, path: str, kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Status, the compared headers and the masked body of one request."""
    r = client.request(method, base + path, **kwargs)
    body = r.content
    for pattern, replacement in MASKS:
        body = pattern.sub(replacement, body)
    return r.status_code, {h: r.headers[h] for h in HEADERS if h in r.headers}, body


def _difference(a: tuple[Any, ...], b: tuple[Any, ...]) -> str:
    at = next((i for i, (x, y) in enumerate(zip(a[2], b[2], strict=False)) if x != y), min(len(a[2]), len(b[2])))
    return (f"{a[0]} {a[1]} vs {b[0]} {b[1]}; bodies from byte {at}:\n"
            f"    {a[2][max(0, at - 60):at + 120]!r}\n    {b[2][max(0, at - 60):at + 120]!r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--baseline", type=Path, required=True, help="the other checkout (e.g. a git worktree)")
    args, flags = ap.parse_known_args()
    settings = dict(zip((f[2:].replace("-", "_") for f in flags[::2]), flags[1::2], strict=False))
    if settings_to_flags(settings) != flags:
        ap.error("server flags go as '--name value' pairs")
    requests = [*_examples(), *_speech(), *_malformed()]
    differ = 0
    with running_server(root=args.baseline.resolve(), **settings) as before, running_server(**settings) as after, \
            httpx.Client(timeout=120) as client:
        for name, method, path, kwargs in requests:
            a = answer(client, before.url, method, path, kwargs)
            b = answer(client, after.url, method, path, kwargs)
            if a != b:
                differ += 1
                print(f"DIFFERENT {name}: {_difference(a, b)}")
    print(f"{len(requests) - differ} of {len(requests)} answers identical")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
