"""The API's OpenAPI document and its interactive docs: offline assets and request examples that work.

``/docs`` (Swagger UI) and ``/redoc`` load their JavaScript and CSS from the
``fastapi-offline`` package, installed with the server extra, instead of a
CDN, so they render on a cluster without internet.  The JSON request bodies
get examples taken from the protocol's conformance vectors, so "Try it out"
sends a request that validates and scores as it is.

The routes read their bodies raw: the size limit and the body's deadline hold
before any parsing, the parsing runs off the event loop, a batch keeps each
item's error in its slot, and every error keeps its protocol code.  So FastAPI
never sees the request models, and the document gets them here, with the
statuses a client can actually receive.
"""

from __future__ import annotations

import json
from functools import cache
from importlib import resources
from typing import Any

from fastapi import FastAPI
from fastapi.openapi.utils import get_openapi

from audio_reward.protocol import BatchScoreRequest, ScoreRequest, SpeakerRequest

from ..openai_protocol import TranscriptionUploadDoc

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
    return json.loads(text)


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


_REQUEST_MODELS = (ScoreRequest, BatchScoreRequest, SpeakerRequest, TranscriptionUploadDoc)
"""The bodies the routes read raw (and name in their ``openapi_extra``): the document's components."""


def api_document(app: FastAPI) -> dict[str, Any]:
    """``app``'s OpenAPI document: FastAPI's, with the request models, examples, and no 422 (never answered)."""
    if app.openapi_schema is None:
        schema = get_openapi(title=app.title, version=app.version, description=app.description, routes=app.routes)
        components = schema.setdefault("components", {}).setdefault("schemas", {})
        for model in _REQUEST_MODELS:
            model_schema = model.model_json_schema(ref_template="#/components/schemas/{model}")
            components.update(model_schema.pop("$defs", {}))
            components[model.__name__] = model_schema
        add_request_examples(schema)
        _drop_validation_responses(schema)
        app.openapi_schema = schema
    return app.openapi_schema


def _drop_validation_responses(schema: dict[str, Any]) -> None:
    """Take out the 422 FastAPI documents for every route with a parameter: parameter errors are answered
    400 (:mod:`.errors`)."""
    for path_item in schema.get("paths", {}).values():
        for operation in path_item.values():
            if isinstance(operation, dict):
                operation.get("responses", {}).pop("422", None)
    components = schema.get("components", {}).get("schemas", {})
    for name in ("HTTPValidationError", "ValidationError"):
        components.pop(name, None)


def offline_docs_app(**kwargs: Any) -> FastAPI:
    """A FastAPI app whose /docs and /redoc pages use only locally served assets, documented by
    :func:`api_document`."""
    from fastapi_offline import FastAPIOffline

    app = FastAPIOffline(static_url=STATIC_URL, **kwargs)
    app.openapi = lambda: api_document(app)  # type: ignore[method-assign]
    return app
