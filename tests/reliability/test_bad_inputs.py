"""The bad-input battery against a real tiny.en server over raw HTTP.

Every case gets a 4xx in the protocol's error shape (or, where the input is
valid after all, a correct score), never a 5xx; the server's memory stays
bounded; a valid request right after succeeds. CI probes with a valid
request after each group of cases; the full run (``AUDIO_REWARD_TEST_RELIABILITY_FULL=1``)
after every case.
"""

from __future__ import annotations

from collections import Counter
from urllib.parse import urlsplit

import pytest

from tests.testkit.probes import RssSampler
from tests.testkit.server import ServerHandle

from .bad_inputs import BadInput, build_cases, run_battery
from .budget import FULL
from .conftest import BODY_LIMIT

CASES = build_cases(BODY_LIMIT)


def test_battery_has_at_least_50_cases_in_every_group() -> None:
    assert len(CASES) >= 50
    assert len({c.name for c in CASES}) == len(CASES)
    groups = Counter(c.group for c in CASES)
    assert set(groups) >= {"json", "types", "numbers", "nonfinite", "audio", "rate", "long", "nesting", "unicode",
                           "transport", "batch"}


def _with_key(cases: list[BadInput], headers: dict[str, str]) -> list[BadInput]:
    return [BadInput(c.name, c.group, c.body, c.expect, c.code, c.path, c.method, {**c.headers, **headers})
            for c in cases]


def test_every_bad_input_is_refused_cleanly(tiny_server: ServerHandle, auth_headers: dict[str, str]) -> None:
    parts = urlsplit(tiny_server.url)
    cases = _with_key(CASES, auth_headers)
    # CI: a valid probe after the last case of each group; full run: after every case.
    probe_after = set(range(len(cases))) if FULL else {
        i for i, c in enumerate(cases) if i + 1 == len(cases) or cases[i + 1].group != c.group}
    failures: list[str] = []
    outcomes = []
    with RssSampler(tiny_server.pid) as rss:
        for i, case in enumerate(cases):
            (outcome,) = run_battery(parts.hostname or "127.0.0.1", parts.port or 80, [case],
                                     probe=i in probe_after, headers=auth_headers)
            outcomes.append(outcome)
            if outcome.problems or (i in probe_after and not outcome.valid_after):
                failures.append(f"{case.name}: {outcome.status} {outcome.code} {outcome.problems} "
                                f"valid_after={outcome.valid_after}")
    assert not failures, "\n".join(failures)
    assert all(o.status < 500 for o in outcomes)
    # A 16 MiB body is parsed into a few copies at most; nothing accumulates across ~100 requests.
    growth_mib = (rss.peak - rss.baseline) / 2**20
    assert growth_mib < 8 * BODY_LIMIT / 2**20, f"server RSS grew by {growth_mib:.0f} MiB"
    assert tiny_server.proc.poll() is None, "the server process died"


@pytest.mark.parametrize("path", ["/v1/score", "/score"])
def test_compat_path_refuses_like_v1(tiny_server: ServerHandle, auth_headers: dict[str, str],
                                     path: str) -> None:
    parts = urlsplit(tiny_server.url)
    sample = [c for c in CASES if c.group in ("json", "nonfinite") and c.path == "/v1/score"]
    cases = [BadInput(c.name, c.group, c.body, c.expect, c.code, path, c.method, {**c.headers, **auth_headers})
             for c in sample]
    outcomes = run_battery(parts.hostname or "127.0.0.1", parts.port or 80, cases, probe=False)
    assert [o.problems for o in outcomes if o.problems] == []
