"""The sync client offers what the async client offers: every public method, every argument, the same types.

``ScorerClient`` wraps ``AsyncScorerClient``; a method or an argument added to the async face alone leaves
threaded code without it, so this compares the two faces member by member. ``aclose`` is ``close`` on the
sync face; the context-manager dunders differ by design (``async with`` against ``with``).
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

import audio_reward.scorer_client as client_package
from audio_reward.scorer_client import AsyncScorerClient, ScorerClient

SYNC_NAME = {"aclose": "close"}
"""Async members whose sync counterpart has another name."""

ELSEWHERE = {"AsyncTransport": "audio_reward.scorer_client.transport"}
"""Signature types documented in a submodule, beside the types that go with them (a transport's Request,
Response and errors live in ``transport``)."""


def _public(cls: type) -> dict[str, Any]:
    return {name: value for name, value in vars(cls).items() if not name.startswith("_")}


def _async_members() -> list[str]:
    return sorted([*_public(AsyncScorerClient), "__init__"])


def _signature(cls: type, name: str) -> inspect.Signature:
    return inspect.signature(getattr(cls, name))


@pytest.mark.parametrize("name", _async_members())
def test_the_sync_client_has_each_public_member_of_the_async_client(name: str) -> None:
    sync_name = SYNC_NAME.get(name, name)
    async_member = vars(AsyncScorerClient)[name]
    sync_member = vars(ScorerClient).get(sync_name)
    assert sync_member is not None, f"ScorerClient lacks {sync_name} (AsyncScorerClient.{name})"
    if isinstance(async_member, property):
        assert isinstance(sync_member, property), f"ScorerClient.{sync_name} must be a property"
        return
    assert not inspect.iscoroutinefunction(sync_member), f"ScorerClient.{sync_name} must block, not be async"
    want = _signature(AsyncScorerClient, name)
    got = _signature(ScorerClient, sync_name)
    assert list(got.parameters) == list(want.parameters), (
        f"ScorerClient.{sync_name} takes {list(got.parameters)}, AsyncScorerClient.{name} {list(want.parameters)}")
    for param, expected in want.parameters.items():
        actual = got.parameters[param]
        assert (actual.kind, actual.default, actual.annotation) == \
            (expected.kind, expected.default, expected.annotation), f"{sync_name}({param}): {actual} != {expected}"
    assert got.return_annotation == want.return_annotation, f"{sync_name} returns {got.return_annotation}"


def test_the_sync_client_has_nothing_public_that_the_async_one_lacks() -> None:
    async_names = {SYNC_NAME.get(name, name) for name in _public(AsyncScorerClient)}
    assert set(_public(ScorerClient)) <= async_names | {"settings"}


@pytest.mark.parametrize("name", _async_members())
def test_every_type_in_a_client_signature_is_importable_from_the_client_package(name: str) -> None:
    member = vars(AsyncScorerClient)[name]
    if isinstance(member, property):
        return
    hints = inspect.get_annotations(member, eval_str=False)
    named = {word for hint in hints.values() for word in str(hint).replace("|", " ").replace("[", " ")
             .replace("]", " ").replace(",", " ").split() if word[:1].isupper()}
    # Standard-library and typing names (Any, Mapping, Iterable, Sequence, Path) come from the standard library.
    named -= {"Any", "Mapping", "Iterable", "Sequence", "Path", "None", *ELSEWHERE}
    missing = sorted(n for n in named if not hasattr(client_package, n))
    assert not missing, f"AsyncScorerClient.{name} names {missing}, not importable from audio_reward.scorer_client"
