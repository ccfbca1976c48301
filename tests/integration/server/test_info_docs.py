"""Every ``/v1/info`` key the docs name exists in a real server's answer.

The docs name keys as a list in backticks right after a mention of
`` `GET /v1/info` `` or `` `/v1/info` ``: in parentheses, or after a colon up
to the clause's end (``.`` or ``;``); dotted from the top for nested keys, or
by a nested key's own name. E.g.
"`GET /v1/info` (`supported_protocol_versions`, `endpoints`)", "`GET /v1/info`
shows which mode runs: `batching.engine_batches`, the effective `max_batch_size`".
"""

from __future__ import annotations

import re
from typing import Any

import httpx

from tests.testkit.server import REPO_ROOT

MENTION = re.compile(r"/v1/info`[^`(:.)|\n]{0,40}[(:](.*?)(?:\)|[.;](?:\s|$))", re.S)
KEY = re.compile(r"`([a-z_][a-z0-9_]*(?:\.[a-z_][a-z0-9_]*)*)`")


def named_keys() -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for doc in [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]:
        for match in MENTION.finditer(doc.read_text(encoding="utf-8")):
            for key in KEY.findall(match.group(1)):
                out.setdefault(key, []).append(doc.name)
    return out


def _names(info: Any) -> set[str]:
    """Every key at any depth."""
    if not isinstance(info, dict):
        return set()
    return set(info) | {n for v in info.values() for n in _names(v)}


def _has(info: Any, dotted: str) -> bool:
    if "." not in dotted:
        return dotted in _names(info)
    for part in dotted.split("."):
        if not isinstance(info, dict) or part not in info:
            return False
        info = info[part]
    return True


def test_docs_name_only_info_keys_that_exist(scorer_url: str) -> None:
    keys = named_keys()
    assert "supported_protocol_versions" in keys and "batching.engine_batches" in keys  # the pattern still finds them
    info = httpx.get(f"{scorer_url}/v1/info", timeout=10).json()
    missing = {k: docs for k, docs in keys.items() if not _has(info, k)}
    assert not missing, f"docs name /v1/info keys the server does not answer: {missing}"
