"""What type checkers see of ``RewardOptions`` is what runs: the same fields, all optional.

At run time ``RewardOptions`` is generated from ``RewardPolicy``'s declarations; type
checkers read a plain declaration under ``TYPE_CHECKING`` instead. The two are compared
here from the module's source, since the checkers' branch never runs.
"""

from __future__ import annotations

import ast
import inspect

from audio_reward.protocol import reward
from audio_reward.protocol.reward import SERVER_ONLY_FIELDS, RewardOptions, RewardPolicy


def _fields(cls: ast.ClassDef) -> dict[str, ast.AnnAssign]:
    return {node.target.id: node for node in cls.body
            if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)}


def _classes() -> tuple[ast.ClassDef, ast.ClassDef]:
    tree = ast.parse(inspect.getsource(reward))
    policy = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "RewardPolicy")
    checking = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING"
                    and any(isinstance(b, ast.ClassDef) and b.name == "RewardOptions" for b in n.body))
    stub = next(b for b in checking.body if isinstance(b, ast.ClassDef) and b.name == "RewardOptions")
    return policy, stub


def test_the_checkers_declaration_has_the_runtime_fields_in_order() -> None:
    _, stub = _classes()
    assert list(_fields(stub)) == list(RewardOptions.model_fields)


def test_each_field_is_the_policys_type_or_none_and_defaults_to_none() -> None:
    policy, stub = _classes()
    declared = _fields(policy)
    for name, node in _fields(stub).items():
        assert name not in SERVER_ONLY_FIELDS
        assert ast.unparse(node.annotation) == f"{ast.unparse(declared[name].annotation)} | None", name
        assert node.value is not None and ast.unparse(node.value) == "None", name
        assert RewardOptions.model_fields[name].default is None
    assert set(declared) - set(_fields(stub)) == SERVER_ONLY_FIELDS
    assert set(RewardPolicy.model_fields) == set(declared)
