"""Protocol versions spoken by this package."""

from __future__ import annotations

PROTOCOL_VERSION = "1"
"""The version this package writes."""

SUPPORTED_VERSIONS: tuple[str, ...] = ("1",)
"""Major versions this package reads.  A minor version ("1.2") reads as its major."""


def is_supported(version: object) -> bool:
    """Whether ``version`` is a string whose major version (``"1.3"`` → ``"1"``) this package speaks."""
    return isinstance(version, str) and version.split(".", 1)[0].strip() in SUPPORTED_VERSIONS
