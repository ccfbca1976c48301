"""No import cycle anywhere in audio_reward, type-only and function-level imports included.

Read from the source with ``ast``, as the layering test beside it reads the server's imports: a module that
imports another only under ``TYPE_CHECKING`` or inside a function still depends on it, and a cycle hidden
that way is one a later plain import turns into an ImportError.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[3] / "audio_reward"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def imports_of(name: str) -> set[str]:
    """The audio_reward modules ``name`` imports, anywhere in it, relative imports resolved.

    ``from a import b`` depends on module ``a.b`` when there is one, else on ``a`` (b is a name ``a`` defines).
    A package's ``__init__`` that runs first because a submodule is imported is not counted: every submodule
    would otherwise depend on it.
    """
    path = MODULES[name]
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.update(f"{base}.{alias.name}" if f"{base}.{alias.name}" in MODULES else base for alias in node.names)
    return {module for module in found if module in MODULES and module != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_graph_sees_relative_type_only_and_function_level_imports() -> None:
    deps = imports_of("audio_reward.scorer_server.http.deps")
    assert "audio_reward.scorer_server.parts" in deps  # from ..parts import ServerParts
    parts = imports_of("audio_reward.scorer_server.parts")
    assert "audio_reward.scorer_server.service.pipeline" in parts  # from .service.pipeline import ScoringPipeline
    guarded = ast.parse("if TYPE_CHECKING:\n    from .b import c\n\ndef f():\n    import audio_reward.d\n")
    assert sum(isinstance(node, (ast.Import, ast.ImportFrom)) for node in ast.walk(guarded)) == 2


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_audio_reward_is_part_of_an_import_cycle() -> None:
    graph = {name: imports_of(name) for name in MODULES}
    found = cycles(graph)
    assert not found, "modules that import each other, directly or around a loop:\n" + "\n".join(
        ", ".join(component) for component in found)


PARTS = ("protocol", "scoring", "scorer_server", "scorer_client", "trainer_plugin")
MAY_IMPORT = {
    "protocol": set(),
    "scoring": {"protocol"},
    "scorer_server": {"protocol", "scoring"},
    "scorer_client": {"protocol"},
    "trainer_plugin": {"protocol", "scoring", "scorer_client"},  # scoring: mcq.py's multiple-choice reward
}
"""The parts of docs/architecture.md and the parts each may import: the client knows nothing of the server or of
the trainer plugin (verl-omni's rollout-shaped ``compute_score`` is the plugin's), nothing imports the server."""


def part_of(module: str) -> str | None:
    name = module.split(".")[1] if module.count(".") else ""
    return name if name in PARTS else None


def test_each_part_imports_only_the_parts_below_it() -> None:
    crossing = sorted(f"{name} imports {imported}" for name in MODULES if (part := part_of(name)) is not None
                      for imported in imports_of(name)
                      if part_of(imported) not in (None, part, *MAY_IMPORT[part]))
    assert not crossing, "imports against the layering of docs/architecture.md:\n" + "\n".join(crossing)
