"""The recipes' override tables render exactly the trainer command lines captured in ``data/recipe_overrides.json``.

The golden file was written from the launch code before its overrides became
tables; any change to a recipe's command line shows up here as a diff.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audio_reward.trainer_plugin.recipes.launch import plan

GOLDEN = Path(__file__).parent / "data" / "recipe_overrides.json"

CASES: dict[str, tuple[str, dict[str, str]]] = {
    "tts_defaults": ("qwen3_tts_grpo", {"AUDIO_REWARD_URL": "http://scorer:8000"}),
    "tts_all_set": ("qwen3_tts_grpo", {
        "AUDIO_REWARD_URL": "http://a:1,http://b:2", "SPK_REF_WAV": "ref.wav", "TTS_LANGUAGE": "English",
        "SCORER_LANGUAGE": "zh", "NUM_GPUS": "4", "SEED": "7", "TOTAL_TRAINING_STEPS": "9", "TEST_FREQ": "3",
        "SAVE_FREQ": "5", "RESUME_MODE": "disable", "OUTPUT_DIR": "/runs/x", "MAX_FAILED_GROUPS": "2"}),
    "thinker_defaults": ("omni_thinker_grpo", {}),
    "thinker_all_set": ("omni_thinker_grpo", {"NUM_GPUS": "16", "ROLLOUT_TP": "4", "OUTPUT_DIR": "out/t",
                                              "MAX_FAILED_GROUPS": "1"}),
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
