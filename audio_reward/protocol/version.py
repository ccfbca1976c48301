"""Protocol versions spoken by this package."""

from __future__ import annotations

PROTOCOL_VERSION = "1"
"""The version this package writes."""

SUPPORTED_VERSIONS: tuple[str, ...] = ("1",)
"""Major versions this package reads.  A minor version ("1.2") reads as its major."""


def major_of(version: str) -> str:
    """The major component of a version string: ``"1.3"`` → ``"1"``."""
    return version.split(".", 1)[0].strip()


def is_supported(version: object) -> bool:
    """Whether ``version`` is a string whose major version this package speaks."""
    return isinstance(version, str) and major_of(version) in SUPPORTED_VERSIONS
