"""The variables users set once for the scorer server and its clients alike, and how a secret is shown.

Each part reads its own ``AUDIO_REWARD_<PART>_*`` variables; these two names
are shared so one exported URL and one key serve the server, the client, the
``eval`` command and the trainer plugin.
"""

from __future__ import annotations

URL_ENV = "AUDIO_REWARD_URL"
"""The scorer URL(s) the clients call (comma separated)."""
API_KEY_ENV = "AUDIO_REWARD_API_KEY"
"""The API key the server requires and the clients send."""
SECRET_MASK = "**********"
"""What a set secret shows as in start-up lines and settings dumps (pydantic's own ``SecretStr`` form)."""


def masked(secret: object) -> str | None:
    """``SECRET_MASK`` when ``secret`` is set (not None or empty), else None: only whether it is set shows."""
    return SECRET_MASK if secret else None
