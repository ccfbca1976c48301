"""Reading verl-omni's registrations from source: each way its modules spell a registration, and the checkouts.

The forms below are the ones verl-omni's tree uses (a string, a module constant, an attribute chain, an
aliased import of verl's agent-loop ``register``). The last tests read real checkouts, named by
``VERL_OMNI_MAIN_SRC`` (verl-omni main) and ``VERL_OMNI_SRC`` (a tree with the Qwen3-TTS pipeline); CI has
neither, since verl-omni is not on PyPI, and skips them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from audio_reward.trainer_plugin import preflight
from audio_reward.trainer_plugin.omni_source import (
    TTS_COMMIT,
    audio_manager_problem,
    missing_registrations,
    read_registrations,
)

TTS_NEEDS = {"rollout": "vllm_omni", "agent_loop": "omni_single_turn_agent", "pipeline": "qwen3_tts_rl"}


def package(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / "verl_omni" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root / "verl_omni"


def test_each_spelling_of_a_registration_is_read(tmp_path: Path) -> None:
    pkg = package(tmp_path, {
        "__init__.py": "",
        "pipelines/tts.py": (
            "from verl_omni.pipelines import model_base\n"
            "_PIPELINE_ID = 'qwen3_tts_rl'\n"
            "@model_base.OmniRolloutPipelineBase.register(_PIPELINE_ID)\nclass A: ...\n"
            "@OmniRolloutPipelineBase.register('qwen3_omni_moe')\nclass B: ...\n"
            "@VllmOmniPipelineBase.register('Flux', algorithm='flow_grpo')\nclass C: ...\n"  # another registry
        ),
        "agent_loop/loop.py": (
            "from verl.experimental.agent_loop.agent_loop import register as reg\n"
            "@reg('omni_single_turn_agent')\nclass L: ...\n"
        ),
        "other/registry.py": "def register(name): ...\n@register('not_an_agent_loop')\nclass X: ...\n",
        "workers/rollout/replica.py": "RolloutReplicaRegistry.register('vllm_omni', lambda: None)\n",
        "broken.py": "def (:\n",
    })
    found = read_registrations(pkg)
    assert found.pipelines == {"qwen3_tts_rl", "qwen3_omni_moe"}
    assert found.agent_loops == {"omni_single_turn_agent"}
    assert found.rollouts == {"vllm_omni"}
    assert missing_registrations(found, **TTS_NEEDS) == []


def test_a_tree_without_the_tts_pipeline_is_named(tmp_path: Path) -> None:
    pkg = package(tmp_path, {"workers/rollout/replica.py": "RolloutReplicaRegistry.register('vllm_omni', f)\n"})
    found = read_registrations(pkg)
    assert missing_registrations(found, **TTS_NEEDS) == ["agent loop 'omni_single_turn_agent'",
                                                         "pipeline 'qwen3_tts_rl'"]


def test_the_audio_manager_must_read_the_rate_where_the_rollout_writes_it(tmp_path: Path) -> None:
    reads_rate = package(tmp_path / "a", {"reward_loop/reward_manager/audio.py":
                                          "rate = extra_info.get('audio_sample_rate')\n"})
    assert audio_manager_problem(reads_rate) is None
    assumes_rate = package(tmp_path / "b", {"reward_loop/reward_manager/audio.py":
                                            "sr = nb.get('sr')\nsr = int(sr or 24000)\n"})
    assert "never reads 'audio_sample_rate'" in str(audio_manager_problem(assumes_rate))
    assert "no AudioRewardManager" in str(audio_manager_problem(package(tmp_path / "c", {"__init__.py": ""})))


def tts_config(manager_path: str = "pkg://audio_reward.trainer_plugin.reward_manager") -> dict[str, object]:
    return {"actor_rollout_ref": {"rollout": {
        "name": "vllm_omni", "agent": {"default_agent_loop": "omni_single_turn_agent"},
        "engine_kwargs": {"vllm_omni": {"pipeline_name": "qwen3_tts_rl"}}}},
        "reward": {"reward_manager": {"module": {"path": manager_path}}}}


def checkout(variable: str) -> Path:
    source = os.environ.get(variable)
    if not source or not (Path(source) / "verl_omni" / "__init__.py").is_file():
        pytest.skip(f"{variable} names no verl-omni checkout (verl-omni is not on PyPI; CI has none)")
    return Path(source)


def test_verl_omni_main_cannot_run_the_tts_recipe_and_the_check_names_the_commit(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VERL_OMNI_SRC", str(checkout("VERL_OMNI_MAIN_SRC")))
    if preflight.package_dir() != Path(os.environ["VERL_OMNI_SRC"]).resolve() / "verl_omni":
        pytest.skip("an installed verl_omni takes precedence over VERL_OMNI_SRC here")
    (check,) = preflight.check_omni_install(tts_config())
    assert not check.ok
    assert "registers no agent loop 'omni_single_turn_agent', pipeline 'qwen3_tts_rl'" in check.message
    assert f"install verl-omni at {TTS_COMMIT[:8]}" in check.message


def test_a_tree_with_the_tts_pipeline_passes(monkeypatch: pytest.MonkeyPatch) -> None:
    source = checkout("VERL_OMNI_SRC")
    if preflight.package_dir() != source.resolve() / "verl_omni":
        pytest.skip("an installed verl_omni takes precedence over VERL_OMNI_SRC here")
    if "qwen3_tts_rl" not in read_registrations(source / "verl_omni").pipelines:
        pytest.skip(f"VERL_OMNI_SRC={source} has no Qwen3-TTS pipeline (verl-omni at {TTS_COMMIT[:8]} has)")
    checks = preflight.check_omni_install(tts_config("pkg://verl_omni.reward_loop.reward_manager.audio"))
    assert [c.ok for c in checks] == [True], checks
