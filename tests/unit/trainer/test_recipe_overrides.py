"""The recipes' override tables render exactly the trainer command lines captured in ``data/recipe_overrides.json``.

The golden file was written from the launch code before its overrides became
tables; any change to a recipe's command line shows up here as a diff.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from audio_reward.trainer_plugin import preflight
from audio_reward.trainer_plugin.preflight import check_rollout
from audio_reward.trainer_plugin.recipes.launch import EXTERNAL_MODULES, LaunchError, plan, recipe
from audio_reward.trainer_plugin.recipes.overrides import LORA_EXCLUDE, THINKER_OVERRIDES, TTS_OVERRIDES, ov

GOLDEN = Path(__file__).parent / "data" / "recipe_overrides.json"

CASES: dict[str, tuple[str, dict[str, str]]] = {
    "tts_defaults": ("qwen3_tts_grpo", {"AUDIO_REWARD_URL": "http://scorer:8000"}),
    "tts_all_set": ("qwen3_tts_grpo", {
        "AUDIO_REWARD_URL": "http://a:1,http://b:2", "SPK_REF_WAV": "ref.wav", "TTS_LANGUAGE": "English",
        "SCORER_LANGUAGE": "zh", "NUM_GPUS": "4", "SEED": "7", "TOTAL_TRAINING_STEPS": "9", "TEST_FREQ": "3",
        "SAVE_FREQ": "5", "RESUME_MODE": "disable", "OUTPUT_DIR": "/runs/x", "MAX_FAILED_GROUPS": "2"}),
    "thinker_defaults": ("omni_thinker_grpo", {}),
    "thinker_all_set": ("omni_thinker_grpo", {"NUM_GPUS": "16", "ROLLOUT_TP": "4", "OUTPUT_DIR": "out/t",
                                              "MAX_FAILED_GROUPS": "1", "TIS_THRESHOLD": "2.0"}),
    "thinker_full": ("omni_thinker_grpo", {"BACKBONE": "full"}),
}
PATHS = ("MODEL_PATH", "TRAIN_FILE", "VAL_FILE", "SPK_EMBED_PATH")


def rendered(recipe: str, settings: dict[str, str], tmp_path: Path) -> list[str]:
    """The recipe's command line with ``tmp_path`` written as ``$TMP``, so the golden file holds no machine path."""
    env = dict(settings)
    for var in PATHS:
        (tmp_path / var.lower()).touch()
        env[var] = str(tmp_path / var.lower())
    if "SPK_REF_WAV" in env:
        (tmp_path / env["SPK_REF_WAV"]).touch()
        env["SPK_REF_WAV"] = str(tmp_path / env["SPK_REF_WAV"])
    return [o.replace(str(tmp_path), "$TMP") for o in plan(recipe, environ=env).command]


@pytest.mark.parametrize("case", sorted(CASES))
def test_rendered_overrides_match_the_golden_command_line(case: str, tmp_path: Path) -> None:
    recipe, settings = CASES[case]
    assert rendered(recipe, settings, tmp_path) == json.loads(GOLDEN.read_text(encoding="utf-8"))[case]


def _config(words: list[str]) -> dict[str, Any]:
    """The nested mapping Hydra would build from ``key=value`` words (values left as strings)."""
    config: dict[str, Any] = {}
    for word in words:
        key, _, value = word.lstrip("+").partition("=")
        *parents, leaf = key.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return config


def test_preflight_checks_the_thinker_rollout_against_the_recipes_own_lora_exclusion() -> None:
    values = {"TRAIN_FILE": "t", "VAL_FILE": "v", "MODEL_PATH": "m", "NUM_GPUS": "8", "ROLLOUT_TP": "2",
              "OUTPUT_DIR": "o", "MAX_FAILED_GROUPS": "0"}
    words = recipe("omni_thinker_grpo").overrides.render(values)
    environ = {"VERL_USE_EXTERNAL_MODULES": ",".join(EXTERNAL_MODULES)}
    (ok,) = check_rollout(_config(words), environ)
    assert ok.ok, ok.message
    exclude = THINKER_OVERRIDES.value(LORA_EXCLUDE)
    assert preflight.THINKER_FROZEN == ("talker", "code2wav", "code_predictor", "visual", "audio_tower")
    for module in preflight.THINKER_FROZEN:  # each name the check requires is one the recipe's regex keeps frozen
        assert re.fullmatch(exclude, f"thinker.{module}.layers.0.proj")
    assert not re.fullmatch(exclude, "thinker.model.layers.0.self_attn.q_proj")
    narrowed = [w.replace("|.*code2wav.*", "") if w.startswith(f"{LORA_EXCLUDE}=") else w for w in words]
    (refused,) = check_rollout(_config(narrowed), environ)
    assert not refused.ok and "code2wav" in refused.message and LORA_EXCLUDE in refused.message


def test_a_row_with_when_is_rendered_only_when_its_variable_is_set() -> None:
    row = ov("+reward.audio_reward.reference_audio", "${SPK_REF_WAV}", when="SPK_REF_WAV")
    assert row.render({"SPK_REF_WAV": ""}) is None
    assert row.render({"SPK_REF_WAV": "/r.wav"}) == "+reward.audio_reward.reference_audio=/r.wav"
    assert ov("++data.x", 1).add == "++" and ov("++data.x", 1).key == "data.x"
    with pytest.raises(KeyError):
        TTS_OVERRIDES.value("data.no_such_key")


def test_a_row_with_when_name_equals_value_is_rendered_only_for_that_value() -> None:
    row = ov("actor_rollout_ref.model.lora_rank", "0", when="BACKBONE=full")
    assert row.render({"BACKBONE": "full"}) == "actor_rollout_ref.model.lora_rank=0"
    assert row.render({"BACKBONE": "lora"}) is None and row.render({}) is None
    other = ov("actor_rollout_ref.model.lora_rank", "32", when="BACKBONE!=full")
    assert other.render({"BACKBONE": "full"}) is None
    assert other.render({"BACKBONE": "lora"}) == other.render({}) == "actor_rollout_ref.model.lora_rank=32"


def test_the_thinker_backbone_is_a_choice_of_lora_or_full(tmp_path: Path) -> None:
    lora = _config(rendered("omni_thinker_grpo", {}, tmp_path)[2:])
    full = _config(rendered("omni_thinker_grpo", {"BACKBONE": "full"}, tmp_path)[2:])
    model, actor = "actor_rollout_ref.model", "actor_rollout_ref.actor.optim"
    assert (lora["actor_rollout_ref"]["model"]["lora_rank"], full["actor_rollout_ref"]["model"]["lora_rank"]) == (
        "32", "0")
    assert "target_modules" not in full["actor_rollout_ref"]["model"], model  # no LoRA to place
    assert (lora["actor_rollout_ref"]["actor"]["optim"]["lr"], full["actor_rollout_ref"]["actor"]["optim"]["lr"]) == (
        "3e-6", "1e-6"), actor
    for config in (lora, full):  # both regimes: the mismatch metric, seed 003's single epoch, a thinking answer's room
        assert config["actor_rollout_ref"]["rollout"]["calculate_log_probs"] == "true"
        assert config["trainer"]["total_epochs"] == "1" and config["trainer"]["max_actor_ckpt_to_keep"] == "2"
        assert config["data"]["max_response_length"] == "12288"
    environ = {"VERL_USE_EXTERNAL_MODULES": ",".join(EXTERNAL_MODULES)}
    (ok,) = check_rollout(full, environ)
    assert ok.ok and ok.message == "qwen3_omni_moe: the full backbone (lora_rank 0)"
    with pytest.raises(LaunchError, match="BACKBONE=Full: one of lora, full"):
        plan("omni_thinker_grpo", environ={"MODEL_PATH": str(tmp_path), "TRAIN_FILE": str(tmp_path),
                                           "VAL_FILE": str(tmp_path), "BACKBONE": "Full"})
