"""``audio-reward preflight CONFIG [OVERRIDES...]``: check a training config before launching it."""

from __future__ import annotations

import argparse


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "preflight",
        help="check a verl training config: scorer reachable, GRPO group size, reward wiring, data columns",
        description="Compose CONFIG (a recipe name such as qwen3_tts_grpo, or a Hydra YAML file) with the "
                    "Hydra OVERRIDES exactly as the launch would, then check it. Exits 1 when a check fails.",
    )
    p.add_argument("config", help="recipe name (qwen3_tts_grpo, omni_thinker_grpo) or path to a Hydra YAML config")
    p.add_argument("overrides", nargs="*", help="Hydra overrides, as given to the trainer (key=value)")
    p.add_argument("--skip-server", action="store_true", help="do not contact the scorer")
    p.add_argument("--skip-data", action="store_true", help="do not open the parquet files")
    p.add_argument("--skip-model", action="store_true", help="do not inspect the model folder")
    p.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    from .preflight import compose_for_checks, run_checks

    # A config that does not compose is one failed check: the others still run on what is known, so a user
    # learns every problem in one go.
    config, checks = compose_for_checks(args.config, args.overrides)
    if config is not None:
        checks += run_checks(config, skip_server=args.skip_server, skip_data=args.skip_data,
                             skip_model=args.skip_model)
    for check in checks:
        print(f"[{check.status}] {check.name}: {check.message}")
    failed = sum(not c.ok for c in checks)
    print(f"preflight: {len(checks) - failed} passed, {failed} failed")
    return 1 if failed else 0
