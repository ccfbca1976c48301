"""What a verl-omni tree registers and reads, found in its source without importing it.

Importing ``verl_omni`` imports vLLM-Omni, diffusers and CUDA kernels, so a
check that imported it would take minutes on a GPU machine and could not run
anywhere else.  The recipes need three registrations by name: the rollout
(``RolloutReplicaRegistry.register("vllm_omni", ...)``), the agent loop
(verl's ``@register("omni_single_turn_agent")``) and the rollout pipeline
(``@OmniRolloutPipelineBase.register("qwen3_tts_rl")``).  These are read from
the package's syntax trees, resolving a name argument through the module's
string constants, as ``_PIPELINE_ID = "qwen3_tts_rl"`` is written.

verl-omni's main branch carries the Qwen3-TTS pipeline since the Qwen3-TTS GRPO
pull request (#428) merged; :data:`TTS_COMMIT` is the main commit the TTS recipe
is composed against.
"""

from __future__ import annotations

import ast
import contextlib
import importlib.util
import os
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType

TTS_COMMIT = "1eb5a488a1d6fcf0c4b7a708f1ea5ee00cbfb2fd"
"""The verl-omni commit whose tree registers the ``qwen3_tts_rl`` pipeline and the ``omni_single_turn_agent``
loop the TTS recipe runs (github.com/verl-project/verl-omni main, after the Qwen3-TTS GRPO pull request #428).
Main before the merge (a1139baf) lacks both; the side-branch commit ea07c618, pinned before, carries them too."""
TTS_INSTALL = (f"install verl-omni at {TTS_COMMIT[:8]} or a later main commit (git fetch origin main && git checkout "
               f"{TTS_COMMIT[:8]} in the checkout, then docs/training.md section 1)")
# The registry that each class's ``register(name, ...)`` call fills (verl's agent loops use a decorator instead).
REGISTRY_OWNERS = MappingProxyType({"OmniRolloutPipelineBase": "pipeline", "RolloutReplicaRegistry": "rollout"})
AUDIO_MANAGER_FILE = Path("reward_loop", "reward_manager", "audio.py")
RATE_KEY = "audio_sample_rate"
"""Where verl-omni's Qwen3-TTS rollout puts the waveform's sample rate, beside ``audio``."""


@dataclass(frozen=True)
class Registrations:
    """The names a verl-omni package registers, by registry."""

    package: Path
    commit: str | None
    pipelines: frozenset[str]
    agent_loops: frozenset[str]
    rollouts: frozenset[str]

    def describe(self) -> str:
        return f"verl-omni at {self.package.parent}" + (f" (commit {self.commit[:8]})" if self.commit else "")


def package_dir() -> Path | None:
    """The ``verl_omni`` package folder: the installed one, else ``$VERL_OMNI_SRC/verl_omni``; None when neither."""
    spec = importlib.util.find_spec("verl_omni")  # finds, does not import
    if spec is not None and spec.origin:
        return Path(spec.origin).resolve().parent
    source = os.environ.get("VERL_OMNI_SRC")
    if source and (Path(source).expanduser() / "verl_omni" / "__init__.py").is_file():
        return Path(source).expanduser().resolve() / "verl_omni"
    return None


def _commit(folder: Path) -> str | None:
    """The commit of the git checkout whose root is ``folder``; None when ``folder`` is not a checkout's root.

    ``git rev-parse HEAD`` alone answers for any repository above ``folder`` too: a verl-omni copied into
    another project's tree (or installed in a venv inside one) would be named by that project's commit.
    """
    try:
        done = subprocess.run(["git", "-C", str(folder), "rev-parse", "--show-toplevel", "HEAD"],
                              capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    lines = done.stdout.split()
    if done.returncode != 0 or len(lines) != 2 or Path(lines[0]).resolve() != folder.resolve():
        return None
    return lines[1]


def _constants(tree: ast.Module) -> dict[str, str]:
    return {target.id: node.value.value for node in tree.body if isinstance(node, ast.Assign)
            and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)
            for target in node.targets if isinstance(target, ast.Name)}


def _agent_loop_register_names(tree: ast.Module) -> set[str]:
    """Local names bound to verl's agent-loop ``register`` decorator by a ``from ... import``."""
    return {alias.asname or alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
            and "agent_loop" in (node.module or "") for alias in node.names if alias.name == "register"}


def _owner(func: ast.expr) -> str | None:
    """``X`` of a call ``X.register(...)`` or ``a.b.X.register(...)``."""
    if not (isinstance(func, ast.Attribute) and func.attr == "register"):
        return None
    value = func.value
    return value.id if isinstance(value, ast.Name) else value.attr if isinstance(value, ast.Attribute) else None


def _registrations(tree: ast.Module) -> Iterator[tuple[str, str]]:
    """(registry, name) for each registration call in one module whose name argument is a known string."""
    constants = _constants(tree)
    loop_register = _agent_loop_register_names(tree)
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and node.args):
            continue
        first = node.args[0]
        name = first.value if isinstance(first, ast.Constant) else constants.get(getattr(first, "id", ""))
        if not isinstance(name, str):
            continue
        owner = _owner(node.func) or ""
        if owner in REGISTRY_OWNERS:
            yield REGISTRY_OWNERS[owner], name
        elif isinstance(node.func, ast.Name) and node.func.id in loop_register:
            yield "agent_loop", name


def read_registrations(package: Path) -> Registrations:
    """Every pipeline, agent loop and rollout that the ``verl_omni`` package at ``package`` registers."""
    found: dict[str, set[str]] = {"pipeline": set(), "agent_loop": set(), "rollout": set()}
    for path in sorted(package.rglob("*.py")):
        # a file that does not parse is not a module verl-omni could import either
        with contextlib.suppress(SyntaxError, UnicodeDecodeError, OSError):
            for registry, name in _registrations(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
                found[registry].add(name)
    return Registrations(package, _commit(package.parent), frozenset(found["pipeline"]),
                         frozenset(found["agent_loop"]), frozenset(found["rollout"]))


def missing_registrations(found: Registrations, *, rollout: str, agent_loop: str | None,
                          pipeline: str | None) -> list[str]:
    """``what 'name'`` for each name the recipe needs that ``found`` does not register."""
    wanted = [("rollout", rollout, found.rollouts), ("agent loop", agent_loop, found.agent_loops),
              ("pipeline", pipeline, found.pipelines)]
    return [f"{what} {name!r}" for what, name, registered in wanted if name and name not in registered]


def audio_manager_problem(package: Path) -> str | None:
    """Why verl-omni's ``AudioRewardManager`` in ``package`` would not read the rollout's sample rate; None if it does.

    The Qwen3-TTS rollout writes ``audio`` and ``audio_sample_rate``.  One public version of the manager reads
    the rate from ``sr`` and falls back to 24000 when it is absent: a waveform at another rate would be scored
    as 24 kHz without a word.
    """
    path = package / AUDIO_MANAGER_FILE
    if not path.is_file():
        return f"{package.parent} has no verl_omni/{AUDIO_MANAGER_FILE.as_posix()} (no AudioRewardManager)"
    tree = ast.parse(path.read_text(encoding="utf-8"))
    if not any(isinstance(node, ast.Constant) and node.value == RATE_KEY for node in ast.walk(tree)):
        return (f"verl_omni/{AUDIO_MANAGER_FILE.as_posix()} never reads {RATE_KEY!r}, where the Qwen3-TTS rollout "
                "puts the sample rate (this version reads another key and assumes a rate when it is absent)")
    return None
