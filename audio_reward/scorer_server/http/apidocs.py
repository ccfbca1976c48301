"""The interactive API docs: offline assets and request examples that work.

``/docs`` (Swagger UI) and ``/redoc`` load their JavaScript and CSS from the
``fastapi-offline`` package, installed with the server extra, instead of a
CDN, so they render on a cluster without internet.  The JSON request bodies
get examples taken from the protocol's conformance vectors, so "Try it out"
sends a request that validates and scores as it is.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from fastapi import FastAPI

STATIC_URL = "/static-offline-docs"

_ONE = ("valid/verl_omni_v1.json", "A 10 ms tone at 16 kHz as verl-omni's client sends it", "valid/score_response.json")
_BATCH = ("valid/batch_request.json", "Two items, one inheriting the batch's protocol_version",
          "valid/batch_response.json")
# path -> (request example under audio_reward/protocol/examples, its summary, response example)
_EXAMPLES = {"/v1/score": _ONE, "/score": _ONE, "/v1/score/batch": _BATCH}


@cache
def example_body(name: str) -> dict[str, Any]:
    """A committed protocol example (valid by the conformance tests)."""
    # One name per joinpath: Traversable.joinpath takes a single name before Python 3.11.
    text = resources.files("audio_reward.protocol").joinpath("examples").joinpath(name).read_text(encoding="utf-8")
    body: dict[str, Any] = json.loads(text)
    return body


def add_request_examples(schema: dict[str, Any]) -> None:
    """Put a working example on each JSON request body of ``schema`` (an OpenAPI document), and one answer."""
    for path, (name, summary, answer) in _EXAMPLES.items():
        operation = schema.get("paths", {}).get(path, {}).get("post")
        if operation is None:
            continue
        media = operation["requestBody"]["content"]["application/json"]
        media["examples"] = {"valid": {"summary": summary, "value": example_body(name)}}
        ok = operation["responses"]["200"]["content"]["application/json"]
        ok["examples"] = {"scored": {"summary": "The shape of an answer", "value": example_body(answer)}}


def offline_docs_app(**kwargs: Any) -> FastAPI:
    """A FastAPI app whose /docs and /redoc pages use only locally served assets."""
    from fastapi_offline import FastAPIOffline

    return FastAPIOffline(static_url=STATIC_URL, **kwargs)
