"""Training recipes (Hydra configs, launch scripts, data preparation) shipped with the plugin."""

from pathlib import Path

RECIPES_DIR = Path(__file__).resolve().parent


def config_dir(recipe: str) -> Path:
    """The Hydra config folder of ``recipe`` (``qwen3_tts_grpo`` or ``omni_thinker_grpo``)."""
    path = RECIPES_DIR / recipe / "config"
    if not path.is_dir():
        known = sorted(p.name for p in RECIPES_DIR.iterdir() if (p / "config").is_dir())
        raise ValueError(f"unknown recipe {recipe!r}; known: {known}")
    return path
