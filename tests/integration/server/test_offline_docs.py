"""``/docs`` and ``/redoc`` work offline, and their examples work as sent.

Every script, stylesheet and icon the pages reference must be served by the
server itself (from the fastapi-offline package), never from a CDN; the
request examples in the OpenAPI document must validate and score.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

import httpx
import pytest

from audio_reward.protocol import validate_message

ASSET_MARKERS = {
    "swagger-ui-bundle.js": "SwaggerUIBundle",
    "swagger-ui.css": ".swagger-ui",
    "redoc.standalone.js": "Redoc",
}


class _Assets(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.urls: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        for name, value in attrs:
            if name in ("src", "href") and value:
                self.urls.append(value)


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_every_asset_of_the_docs_pages_is_served_locally(scorer_url: str, page: str) -> None:
    html = httpx.get(f"{scorer_url}{page}", timeout=10)
    assert html.status_code == 200
    parser = _Assets()
    parser.feed(html.text)
    assert parser.urls, "the page references no assets"
    # No absolute URL anywhere in the page: not in a tag, not in the inline script.
    assert not re.search(r"https?://", html.text), re.findall(r"https?://[^\s'\"]+", html.text)
    assert not any(url.startswith("//") for url in parser.urls)
    scripts = [url for url in parser.urls if url.endswith(".js")]
    assert scripts, "no script: the page could not render"
    for url in parser.urls:
        asset = httpx.get(f"{scorer_url}{url}", timeout=10)
        assert asset.status_code == 200, url
        marker = ASSET_MARKERS.get(url.rsplit("/", 1)[-1])
        if marker is not None:
            assert marker in asset.text and len(asset.content) > 50_000, url
    assert httpx.get(f"{scorer_url}/openapi.json", timeout=10).status_code == 200


def _request_example(schema: dict, path: str) -> dict:  # type: ignore[type-arg]
    media = schema["paths"][path]["post"]["requestBody"]["content"]["application/json"]
    (example,) = media["examples"].values()
    return example["value"]  # type: ignore[no-any-return]


@pytest.mark.parametrize(("path", "kind"), [
    ("/v1/score", "score_request"), ("/score", "score_request"), ("/v1/score/batch", "batch_request"),
])
def test_openapi_examples_validate_and_score_as_sent(scorer_url: str, path: str, kind: str) -> None:
    schema = httpx.get(f"{scorer_url}/openapi.json", timeout=10).json()
    body = _request_example(schema, path)
    assert validate_message(body, kind)[1] == []  # type: ignore[arg-type]
    assert "string" not in body.values()
    answer = httpx.post(f"{scorer_url}{path}", json=body, timeout=60)
    assert answer.status_code == 200, answer.text
    results = answer.json()["results"] if kind == "batch_request" else [answer.json()]
    assert results and all(isinstance(r["score"], float) for r in results)
    response_kind = "batch_response" if kind == "batch_request" else "score_response"
    ok = schema["paths"][path]["post"]["responses"]["200"]["content"]["application/json"]
    (shown,) = ok["examples"].values()
    assert validate_message(shown["value"], response_kind)[1] == []  # type: ignore[arg-type]


def test_openapi_documents_the_transcription_upload(scorer_url: str) -> None:
    schema = httpx.get(f"{scorer_url}/openapi.json", timeout=10).json()
    upload = schema["paths"]["/v1/audio/transcriptions"]["post"]["requestBody"]["content"]["multipart/form-data"]
    fields = schema["components"]["schemas"][upload["schema"]["$ref"].rsplit("/", 1)[-1]]["properties"]
    assert fields["file"]["format"] == "binary"
    assert {"model", "language", "prompt", "response_format", "temperature"} <= set(fields)
    assert "Only 0 is honoured" in fields["temperature"]["description"]
    assert "$defs" not in str(schema)  # ReDoc refuses documents with JSON-Schema-local references


def _refs(node: object) -> list[str]:
    if isinstance(node, dict):
        return [v for k, v in node.items() if k == "$ref" and isinstance(v, str)] + \
            [r for v in node.values() for r in _refs(v)]
    if isinstance(node, list):
        return [r for v in node for r in _refs(v)]
    return []


def test_openapi_lists_only_statuses_the_server_answers(scorer_url: str) -> None:
    # Parameter errors are answered 400 and bodies are read raw: a 422 in the document would be untrue.
    doc = httpx.get(f"{scorer_url}/openapi.json", timeout=30).json()
    operations = [(path, method, op) for path, item in doc["paths"].items() for method, op in item.items()]
    assert any(path == "/v1/models/{model_id}" for path, _, _ in operations)
    listed = {(path, method): set(op.get("responses", {})) for path, method, op in operations}
    assert not [key for key, statuses in listed.items() if "422" in statuses], listed
    assert listed[("/v1/models/{model_id}", "get")] == {"200", "401", "404"}
    assert httpx.get(f"{scorer_url}/v1/models/not-served", timeout=30).status_code == 404
    components = doc["components"]["schemas"]
    assert "HTTPValidationError" not in components
    dangling = [r for r in _refs(doc) if r.removeprefix("#/components/schemas/") not in components]
    assert not dangling, dangling
