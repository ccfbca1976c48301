"""The launch of each recipe, in one place: environment, entry point and Hydra overrides.

Both recipes run verl-omni's own entry point, ``python -m
verl_omni.trainer.main_omni``, with the recipe expressed as command-line
overrides on its standard ``omni_trainer`` config (``omni_trainer.yaml`` sets
``hydra.searchpath``, so it must stay the primary config: no recipe YAML, no
``--config-path``), rendered from the recipe's table in :mod:`.overrides`.
``run.sh``, ``audio-reward preflight`` and the tests all read :func:`plan`, so
what is checked is what launches.

    python -m audio_reward.trainer_plugin.recipes.launch qwen3_tts_grpo [OVERRIDES...]

prints the plan as ``run.sh`` consumes it: one ``NAME=value`` line per
environment variable to export, a line ``--``, then the trainer command one
shell word per line (``-m``, ``verl_omni.trainer.main_omni``, each override).
The user's overrides come last, so they win.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .._verl import with_external_modules
from .overrides import (
    BACKBONES,
    LORA,
    TEST_FREQ,
    THINKER_OVERRIDES,
    TTS_OVERRIDES,
    VAL_BEFORE_TRAIN,
    VALIDATION_AUDIO_DIR,
    OverrideTable,
)

ENTRY_POINT = ("-m", "verl_omni.trainer.main_omni")
EXTERNAL_MODULES = ("verl_omni", "audio_reward.trainer_plugin.verl_plugin")
"""Imported by ``import verl`` in every Ray worker: verl-omni has no ``verl.plugins`` entry point, and ours
is listed too so the reward manager and ``grpo_masked`` register even where the entry point is absent."""


METRICS_FILE = "metrics.jsonl"
"""verl's file logger writes every step's metrics here, under OUTPUT_DIR; the reward curve is read from it."""


class LaunchError(ValueError):
    """A recipe cannot be launched as configured (missing variable, missing file, bad value)."""


@dataclass(frozen=True)
class Variable:
    """One environment variable a recipe reads."""

    name: str
    help: str
    default: str | None = None
    path: bool = False
    """The value names a file or folder that must exist."""
    choices: tuple[str, ...] = ()
    """The values it may take, where it is a choice."""


@dataclass(frozen=True)
class Recipe:
    """One recipe: what it trains, the environment variables it reads, its trainer overrides."""

    summary: str
    variables: tuple[Variable, ...]
    overrides: OverrideTable
    """The trainer overrides (:mod:`.overrides`), rendered over the resolved variables."""


@dataclass(frozen=True)
class LaunchPlan:
    """What ``run.sh`` exports and runs."""

    env: dict[str, str]
    overrides: list[str]

    @property
    def command(self) -> list[str]:
        """The trainer command after the Python interpreter."""
        return [*ENTRY_POINT, *self.overrides]

    def lines(self) -> list[str]:
        """The dry-run listing: ``NAME=value`` lines, ``--``, one command word per line."""
        return [*(f"{k}={v}" for k, v in self.env.items()), "--", *self.command]


def _variables(recipe: str, model: str, own: tuple[Variable, ...]) -> tuple[Variable, ...]:
    """The variables every recipe reads (its ``model`` folder and data first, output last) around its ``own``."""
    return (
        Variable("MODEL_PATH", model, path=True),
        Variable("TRAIN_FILE", "train parquet (prepare_data.py)", path=True),
        Variable("VAL_FILE", "validation parquet", path=True),
        *own,
        Variable("OUTPUT_DIR", "checkpoints, validation artifacts and logs", default=f"outputs/{recipe}"),
        Variable("MAX_FAILED_GROUPS", "failed GRPO groups tolerated before the run stops (0: stop at the first)",
                 default="0"),
    )


RECIPES: Mapping[str, Recipe] = MappingProxyType({
    "qwen3_tts_grpo": Recipe(
        "GRPO on Qwen3-TTS-12Hz-0.6B-Base codec-0, rewarded by the audio-reward scorer",
        _variables("qwen3_tts_grpo", "local Qwen3-TTS-12Hz-0.6B-Base folder", (
            Variable("SPK_EMBED_PATH", "speaker embedding JSON (audio-reward tts-speaker)", path=True),
            Variable("AUDIO_REWARD_URL", "scorer base URL, e.g. http://scorer:8000"),
            Variable("SPK_REF_WAV", "the reference recording the speaker embedding came from (copied into "
                     "each validation step)", default="", path=True),
            Variable("TTS_LANGUAGE", "language tag of the rollout prompt (verl-omni's qwen3_tts_rl accepts Auto)",
                     default="Auto"),
            Variable("SCORER_LANGUAGE", "language the scorer transcribes in", default="en"),
            Variable("NUM_GPUS", "GPUs on the node", default="2"),
            Variable("SEED", "data, FSDP and rollout seed", default="42"),
            Variable("TOTAL_TRAINING_STEPS", "updates", default="500"),
            Variable("TEST_FREQ", "validate every N updates", default="20"),
            Variable("SAVE_FREQ", "checkpoint every N updates", default="20"),
            Variable("RESUME_MODE", "verl trainer.resume_mode", default="auto"),
        )),
        TTS_OVERRIDES,
    ),
    "omni_thinker_grpo": Recipe(
        "GRPO on the Qwen3-Omni thinker (LoRA or the full backbone) for audio multiple-choice QA",
        _variables("omni_thinker_grpo", "local Qwen3-Omni-30B-A3B-Instruct folder", (
            Variable("NUM_GPUS", "GPUs on the node", default="8"),
            Variable("ROLLOUT_TP", "vLLM-Omni tensor parallel size", default="2"),
            Variable("BACKBONE", "what trains: lora (rank 32 on the attention projections) or full (every weight "
                     "of the thinker, lr 1e-6)", default=LORA, choices=BACKBONES),
            Variable("TIS_THRESHOLD", "truncated importance sampling through verl's rollout correction, weights "
                     "clamped at this value (2.0 is verl's default); empty: off", default=""),
        )),
        THINKER_OVERRIDES,
    ),
})


def recipe(name: str) -> Recipe:
    try:
        return RECIPES[name]
    except KeyError:
        raise LaunchError(f"unknown recipe {name!r}; known: {sorted(RECIPES)}") from None


def resolve(name: str, environ: Mapping[str, str] | None = None, *, strict: bool = True) -> dict[str, str]:
    """The recipe's variables from ``environ`` with defaults; :class:`LaunchError` names each one missing.

    ``strict=False`` (``audio-reward preflight``, which reports the problems itself and checks the rest):
    a variable that is missing or wrong is left as given, empty where unset, and nothing is raised.
    """
    environ = os.environ if environ is None else environ
    values: dict[str, str] = {}
    problems: list[str] = []
    for var in recipe(name).variables:
        value = environ.get(var.name) or (var.default if var.default is not None else "")
        if not value and var.default is None:
            problems.append(f"set {var.name} ({var.help})")
        elif var.path and value and not Path(value).expanduser().exists():
            problems.append(f"{var.name}={value} does not exist ({var.help})")
        elif var.choices and value not in var.choices:
            problems.append(f"{var.name}={value}: one of {', '.join(var.choices)} ({var.help})")
        elif "\n" in value:
            problems.append(f"{var.name} must be one line")
        values[var.name] = value
    if problems and strict:
        raise LaunchError(f"{name}: " + "; ".join(problems))
    return values


def plan(name: str, overrides: Sequence[str] = (), environ: Mapping[str, str] | None = None, *,
         strict: bool = True) -> LaunchPlan:
    """The launch of recipe ``name``: its environment and the trainer overrides, ``overrides`` appended.

    ``strict=False``: the variables as :func:`resolve` leaves them without raising (missing ones empty).
    """
    environ = os.environ if environ is None else environ
    values = resolve(name, environ, strict=strict)
    if bad := [o for o in overrides if "\n" in o]:
        raise LaunchError(f"an override must be one line, got {bad[0]!r}")
    env = {
        "VERL_USE_EXTERNAL_MODULES": with_external_modules(environ, last=EXTERNAL_MODULES),
        "TOKENIZERS_PARALLELISM": "false",
        "VLLM_USE_FLASHINFER_SAMPLER": "0",
        **({"PYTHONHASHSEED": values["SEED"]} if "SEED" in values else {}),
        "OUTPUT_DIR": values["OUTPUT_DIR"],
        "VERL_FILE_LOGGER_PATH": str(Path(values["OUTPUT_DIR"]) / METRICS_FILE),
    }
    return LaunchPlan(env=env, overrides=[*RECIPES[name].overrides.render(values), *overrides])


def _override_value(text: str) -> Any:
    """One override's value as Hydra reads it (``8`` an int, ``true`` a bool, ``[a,b]`` a list), through YAML."""
    try:
        import yaml
    except ImportError:
        return text
    try:
        return yaml.safe_load(text) if text else text
    except yaml.YAMLError:
        return text


def overrides_config(overrides: Sequence[str]) -> dict[str, Any]:
    """Hydra overrides (``[+|++]a.b=value``) as a nested mapping the checks read; deletions (``~a.b``) skipped.

    What a recipe's checks run on where its launch config does not compose: the recipe's own settings,
    without the defaults of verl-omni's ``omni_trainer``.
    """
    out: dict[str, Any] = {}
    for override in overrides:
        key, sep, text = override.lstrip("+").partition("=")
        if not sep or key.startswith("~"):
            continue
        node = out
        *parents, leaf = key.split(".")
        for part in parents:
            if not isinstance(node.get(part), dict):
                node[part] = {}
            node = node[part]
        node[leaf] = _override_value(text)
    return out


def check_run(launch: LaunchPlan) -> list[str]:
    """Problems of a finished run that the trainer does not report: validation steps that wrote no audio."""
    from ..settings import lookup

    config = overrides_config(launch.overrides)
    audio_dir = lookup(config, VALIDATION_AUDIO_DIR)
    if not audio_dir or not (str(lookup(config, VAL_BEFORE_TRAIN, "true")).lower() == "true"
                             or int(lookup(config, TEST_FREQ, -1)) > 0):
        return []
    from ..validation_log import ValidationLogger

    return ValidationLogger(str(audio_dir)).problems()


def _default_note(var: Variable) -> str:
    if var.default is None:
        return ""
    return f" (default {var.default})" if var.default else " (optional)"


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    check = argv[:1] == ["--check-run"]
    argv = argv[1:] if check else argv
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__)
        for name, spec in RECIPES.items():
            print(f"{name}: {spec.summary}")
            for var in spec.variables:
                print(f"  {var.name}: {var.help}{_default_note(var)}")
        return 0 if argv else 2
    try:
        launch = plan(argv[0], argv[1:])
    except LaunchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if check:
        problems = check_run(launch)
        for problem in problems:
            print(f"error: {problem}", file=sys.stderr)
        return 1 if problems else 0
    sys.stdout.write("\n".join(launch.lines()) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
