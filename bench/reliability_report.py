"""Run the measurable parts of the reliability suite and write the figures into docs/reliability.md.

    python -m bench.reliability_report [--requests 10000] [--concurrency 256] [--doc docs/reliability.md]

Measures, each against a real ``audio-reward serve`` process on loopback:
- the load run of ``bench/load.py`` (instant engine): answered once, throughput, p50/p99, peak RSS;
- the bad-input battery against Whisper tiny.en, a valid request after every case: status codes;
- the fault, security, fuzzing and schemathesis tests at their full counts
  (``AUDIO_REWARD_TEST_RELIABILITY_FULL=1``), run by pytest: passed/failed and example counts.
The figures replace the section between the report markers of the doc.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import platform
import re
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

from bench import load
from tests.testkit.probes import RssSampler

REPO = Path(__file__).resolve().parents[1]

START, END = "<!-- reliability-report:start -->", "<!-- reliability-report:end -->"
FULL_ENV = {"AUDIO_REWARD_TEST_RELIABILITY_FULL": "1"}


def _budget() -> object:
    os.environ.update(FULL_ENV)
    from reliability import budget

    return budget


def run_pytest(files: list[str]) -> tuple[int, int, int, float, str]:
    """(passed, failed, skipped, seconds, summary line) of one pytest run at the full counts."""
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *files],
                          cwd=REPO, env={**os.environ, **FULL_ENV}, capture_output=True, text=True, timeout=3_000)
    seconds = time.perf_counter() - t0
    tail = proc.stdout.strip().splitlines()[-1] if proc.stdout.strip() else proc.stderr[-300:]
    counts = {k: int(n) for n, k in re.findall(r"(\d+) (passed|failed|skipped|error)", tail)}
    if proc.returncode not in (0, 5):
        print(proc.stdout[-6000:], file=sys.stderr)
    return counts.get("passed", 0), counts.get("failed", 0) + counts.get("error", 0), counts.get("skipped", 0), \
        seconds, tail


def battery_rows() -> tuple[list[str], int, int, int, float, float]:
    from reliability.bad_inputs import build_cases, run_battery
    from reliability.conftest import API_KEY, BODY_LIMIT

    headers = {"Authorization": f"Bearer {API_KEY}"}
    cases = [c.__class__(c.name, c.group, c.body, c.expect, c.code, c.path, c.method, {**c.headers, **headers})
             for c in build_cases(BODY_LIMIT)]
    with load.scorer_server("tiny.en", env={"AUDIO_REWARD_API_KEY": API_KEY}, max_body_bytes=BODY_LIMIT,
                            max_wait_ms=5) as handle:
        parts = urlsplit(handle.url)
        with RssSampler(handle.pid) as rss:
            outcomes = run_battery(parts.hostname or "127.0.0.1", parts.port or 80, cases, headers=headers)
    by_group: dict[str, Counter[str]] = {}
    for o in outcomes:
        by_group.setdefault(o.case.group, Counter())[f"{o.status} {o.code}" if o.code else str(o.status)] += 1
    rows = []
    for group, counter in by_group.items():
        n = sum(counter.values())
        answers = ", ".join(f"{k} ×{v}" for k, v in sorted(counter.items()))
        clean = sum(1 for o in outcomes if o.case.group == group and o.ok)
        rows.append(f"| {group} | {n} | {answers} | {clean}/{n} |")
    ok = sum(o.ok for o in outcomes)
    fivexx = sum(o.status >= 500 for o in outcomes)
    return rows, ok, len(outcomes) - ok, fivexx, rss.baseline / 2**20, rss.peak / 2**20


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=10_000)
    ap.add_argument("--concurrency", type=int, default=256)
    ap.add_argument("--doc", type=Path, default=REPO / "docs" / "reliability.md")
    args = ap.parse_args()
    budget = _budget()

    print(f"load run: {args.requests} requests at concurrency {args.concurrency} …", flush=True)
    with load.scorer_server("instant", max_queue=512, max_batch_size=32, max_wait_ms=2) as handle:
        rep = load.run_load(handle, args.requests, args.concurrency)
    print("\n".join(rep.lines()), flush=True)

    print("bad-input battery against tiny.en …", flush=True)
    battery, battery_ok, battery_bad, fivexx, b_base, b_peak = battery_rows()
    print(f"battery: {battery_ok} clean of {battery_ok + battery_bad}", flush=True)

    suites = {
        "faults (SIGKILL+restart ×2, engine exception, slow engine)": ["tests/reliability/test_faults.py"],
        "security (API key, no file/URL access, body limits)": ["tests/reliability/test_security.py"],
        "protocol decoder fuzzing (hypothesis)": ["tests/reliability/test_protocol_fuzz.py"],
        "OpenAPI fuzzing (schemathesis)": ["tests/reliability/test_openapi_fuzz.py"],
        "dependency audit (pip-audit)": ["tests/reliability/test_dependency_audit.py"],
    }
    suite_rows = []
    for name, files in suites.items():
        print(f"{name} …", flush=True)
        passed, failed, skipped, seconds, tail = run_pytest(files)
        print(f"  {tail}", flush=True)
        suite_rows.append(f"| {name} | {passed} | {failed} | {skipped} | {seconds:.0f} s |")

    yes = lambda b: "yes" if b else "**NO**"  # noqa: E731
    lines = [
        START,
        f"Measured {dt.date.today().isoformat()} on {platform.machine()} with {os.cpu_count()} CPU cores "
        f"(Python {platform.python_version()}), by `python -m bench.reliability_report`; client and server share "
        "the machine.",
        "",
        "### Load (real server process, instant engine)",
        "",
        "| requests | concurrency | answered exactly once | errors | throughput | p50 | p99 "
        "| server RSS idle → peak (bound) |",
        "|---|---|---|---|---|---|---|---|",
        f"| {rep.requests:,} | {rep.concurrency} | {yes(rep.answered_once)} ({rep.unique_ids:,} ids, "
        f"{rep.server_items_ok:,} scored by the server) | {rep.errors} | {rep.throughput_rps:.0f} req/s | "
        f"{rep.p50_ms:.0f} ms | {rep.p99_ms:.0f} ms | {rep.rss_baseline_mib:.0f} → {rep.rss_peak_mib:.0f} MiB "
        f"({rep.rss_bound_mib:.0f} MiB) |",
        "",
        "### Faults, security and fuzzing (full counts)",
        "",
        f"Full counts: {budget.KILL_ITEMS} items through two SIGKILL+restarts (nothing lost means every item has "  # type: ignore[attr-defined]
        f"exactly one result, its own); {budget.FUZZ_EXAMPLES} hypothesis examples per decoder property; "  # type: ignore[attr-defined]
        f"{budget.SCHEMATHESIS_EXAMPLES} schemathesis examples per operation and mode.",  # type: ignore[attr-defined]
        "",
        "| suite | passed | failed | skipped | time |",
        "|---|---|---|---|---|",
        *suite_rows,
        "",
        f"### Bad-input battery ({battery_ok + battery_bad} cases, Whisper tiny.en, a valid request after each)",
        "",
        f"Clean answers: {battery_ok} of {battery_ok + battery_bad}; 5xx: {fivexx}; "
        f"server RSS {b_base:.0f} → {b_peak:.0f} MiB with a 16 MiB body limit.",
        "",
        "| group | cases | answers (status code ×count) | clean |",
        "|---|---|---|---|",
        *battery,
        END,
    ]
    doc = args.doc.read_text() if args.doc.exists() else f"# Reliability\n\n{START}\n{END}\n"
    head, _, rest = doc.partition(START)
    _, _, tail = rest.partition(END)
    args.doc.write_text(head + "\n".join(lines) + tail)
    print(f"wrote {args.doc}")
    return 0 if rep.answered_once and rep.memory_bounded and battery_bad == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
