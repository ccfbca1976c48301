"""Every install line in README.md and docs/ names a tested environment.

An install line (``pip install -e .``, ``pip install -e '.[server,eval]'``) must be one of the documented
environments that ``scripts/test_environments.sh`` builds fresh (``tests/environments/environments.py``), or one
of them plus extras that another environment of the test run covers (``EXTRA_ONLY_ELSEWHERE``, each saying where).
A new line with a new combination fails here until it is added to one of the two.
"""

from __future__ import annotations

import re

import pytest

from tests.environments.environments import ENVIRONMENTS, EXTRA_ONLY_ELSEWHERE
from tests.testkit.server import REPO_ROOT

# `uv pip install -e ...` lines (docs/training.md, section 1) install verl-omni's own checkout, not this one.
INSTALL = re.compile(
    r"(?<!uv )pip install (?:[^`|#\n]*?\s)?-e\s+"
    r"(?:'\.\[([^\]]*)\]'|\"\.\[([^\]]*)\]\"|\.\[([^\]]*)\]|\.(?=[\s`)]|$))"
)
DOCS = [REPO_ROOT / "README.md", *sorted((REPO_ROOT / "docs").glob("*.md"))]


def install_lines() -> list[tuple[str, frozenset[str]]]:
    found = []
    for path in DOCS:
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            for match in INSTALL.finditer(line):
                extras = next((g for g in match.groups() if g is not None), "")
                found.append((f"{path.relative_to(REPO_ROOT)}:{number}", frozenset(filter(None, extras.split(",")))))
    return found


LINES = install_lines()


def test_the_docs_have_install_lines() -> None:
    assert {extras for _, extras in LINES} >= {frozenset(env.extras) for env in ENVIRONMENTS}


@pytest.mark.parametrize(("where", "extras"), LINES, ids=[w for w, _ in LINES])
def test_an_install_line_is_a_tested_environment(where: str, extras: frozenset[str]) -> None:
    tested = [frozenset(env.extras) for env in ENVIRONMENTS]
    base = max((t for t in tested if t <= extras), key=len)
    extra = extras - base
    assert extra <= set(EXTRA_ONLY_ELSEWHERE), (
        f"{where}: pip install -e '.[{','.join(sorted(extras))}]' is no documented environment "
        f"({', '.join(e.install_spec for e in ENVIRONMENTS)}) plus extras tested elsewhere "
        f"({', '.join(EXTRA_ONLY_ELSEWHERE)}): add it to tests/environments/environments.py"
    )


INDIRECT_TORCH = {"whisper-en": "openai-whisper requires torch", "vllm": "vllm requires torch"}
"""Extras that bring torch through a package of theirs rather than naming it."""

GPU_ONLY = {"vllm": "the vLLM extra is for GPU machines, where pip's CUDA torch is the one wanted"}
"""Torch extras whose install lines may let pip choose torch."""


def torch_extras() -> set[str]:
    """Every extra that installs torch: those that name it in pyproject.toml, and :data:`INDIRECT_TORCH`."""
    import tomllib

    extras = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    named = {name for name, reqs in extras.items() if any(re.match(r"torch\b", r) for r in reqs)}
    return named | set(INDIRECT_TORCH)


def test_the_readme_names_every_extra_that_needs_torch() -> None:
    text = " ".join((REPO_ROOT / "README.md").read_text(encoding="utf-8").split())
    listed = re.search(r"Extras that need torch \(([^)]*)\)", text)
    assert listed is not None, "README.md lost its sentence on the extras that need torch"
    named = set(re.findall(r"`([\w-]+)`", listed[1]))
    assert torch_extras() <= named, f"README.md's torch list lacks {sorted(torch_extras() - named)}"


@pytest.mark.parametrize(("where", "extras"), LINES, ids=[w for w, _ in LINES])
def test_an_install_line_with_a_torch_extra_installs_torch_first(where: str, extras: frozenset[str]) -> None:
    # pip resolves a torch extra to PyPI's CUDA build (gigabytes) unless torch is installed first.
    needs = (extras & torch_extras()) - set(GPU_ONLY)
    if not needs:
        return
    path, number = where.rsplit(":", 1)
    lines = (REPO_ROOT / path).read_text(encoding="utf-8").splitlines()
    before = "\n".join(lines[max(0, int(number) - 4):int(number)])
    assert "torch==" in before, f"{where}: installs {sorted(needs)} without installing torch==… first"


def test_each_readme_install_line_builds_its_environment_in_a_venv_of_its_own() -> None:
    """Issue 40, finding 11: the README says each line builds one environment in a fresh venv; all four used to
    install into the same ``.venv``, each on top of the one before."""
    text = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    start = text.index("Each line below builds one named environment")
    lines = [line.strip() for line in text[start:].split("\n\n", 2)[1].splitlines()]
    line = re.compile(r"python3 -m venv (\S+) && \1/bin/pip install -e (\.|'\.\[[^\]]*\]')\s+# (\w+):")
    built = [line.match(text) for text in lines]
    assert all(built), lines
    folders = [m[1] for m in built if m]
    names = [m[3] for m in built if m]
    assert names == [env.name for env in ENVIRONMENTS] and len(set(folders)) == len(folders), folders
    assert [m[2].strip("'") for m in built if m] == [env.install_spec for env in ENVIRONMENTS]
    assert folders[-1] == ".venv", "the dev environment is the .venv the test and lint lines use"
