"""Schemathesis against the server's own OpenAPI document (``/openapi.json``) on a real server.

Every documented operation gets generated requests (valid by the schema and
mutated away from it): no answer may be a 5xx, and statuses, content types
and bodies must be the documented ones. The server runs the instant engine
of ``tests/testkit/instant_engine.py`` behind an API key, so generated requests that are valid
get scored at once; ``AUDIO_REWARD_TEST_SCHEMATHESIS_EXAMPLES`` bounds examples
per operation.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, given, settings
from schemathesis.checks import not_a_server_error
from schemathesis.generation import GenerationMode
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.testkit.server import ServerHandle, running_server

from .budget import SCHEMATHESIS_EXAMPLES
from .conftest import API_KEY

HEADERS = {"Authorization": f"Bearer {API_KEY}"}
CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


@pytest.fixture(scope="module")
def openapi_server() -> Iterator[ServerHandle]:
    with running_server(instant=True, env={"AUDIO_REWARD_API_KEY": API_KEY}, max_body_bytes=4 * 2**20,
                             max_wait_ms=1) as handle:
        yield handle


def _operations(url: str) -> list[Any]:
    schema = schemathesis.openapi.from_url(f"{url}/openapi.json", headers=HEADERS)
    return [result.ok() for result in schema.get_all_operations()]


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE], ids=lambda m: m.value)
def test_documented_api_never_5xx_and_answers_as_documented(openapi_server: ServerHandle,
                                                            mode: GenerationMode) -> None:
    operations = _operations(openapi_server.url)
    labels = {op.label for op in operations}
    assert {"POST /v1/score", "POST /score", "POST /v1/score/batch", "GET /v1/info"} <= labels, labels
    if mode is GenerationMode.NEGATIVE:
        # Only bodies can be made invalid: a GET without parameters has no negative cases.
        operations = [op for op in operations if op.method.upper() == "POST"]
        labels = {op.label for op in operations}
    calls: dict[str, int] = {}
    for op in operations:
        # hypothesis drives each operation's strategy; schemathesis runs the checks on every answer.
        @given(case=op.as_strategy(generation_mode=mode))
        @settings(max_examples=SCHEMATHESIS_EXAMPLES, deadline=None, database=None,
                  suppress_health_check=list(HealthCheck))
        def run(case: Any) -> None:
            case.call_and_validate(headers=HEADERS, checks=CHECKS, timeout=30)
            calls[op.label] = calls.get(op.label, 0) + 1  # noqa: B023 - run() is called in this iteration

        run()
    assert all(calls.get(label, 0) > 0 for label in labels), calls
    assert openapi_server.proc.poll() is None
