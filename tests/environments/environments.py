"""The documented environments, and what each must do: THE LIST the documented-environments job checks.

Each environment is one install line of the README, built in a fresh venv by
``scripts/test_environments.sh``. ``CHECKS`` holds, per environment, the commands the docs list for it and
what a user gets: an exit status and, for a command whose extra is missing, the one line naming it. The
docs' own command blocks run there too: every ``Run`` entry of ``tests/integration/docs/doc_commands.py``
runs in the environment it names.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Environment:
    name: str
    extras: tuple[str, ...]
    """The extras of its install line; () is ``pip install -e .``."""

    @property
    def install_spec(self) -> str:
        return "." if not self.extras else f".[{','.join(self.extras)}]"


ENVIRONMENTS: tuple[Environment, ...] = (
    Environment("client", ()),
    Environment("server", ("server",)),
    Environment("eval", ("server", "eval")),
    Environment("dev", ("server", "eval", "dev")),
)
"""Each one holds the one before it, as the README's lines do (each line in a venv of its own)."""

BY_NAME = {e.name: e for e in ENVIRONMENTS}

EXTRA_ONLY_ELSEWHERE: dict[str, str] = {
    "eval": "the eval environment (here it adds to the server; the eval command needs no server)",
    "base-model": "the main environment of scripts/test.sh (tests/integration/engines)",
    "whisper-en": "the main environment of scripts/test.sh (tests/unit/scoring/test_whisper_parity.py)",
    "transformers": "the main environment of scripts/test.sh (tests/integration/engines)",
    "signals": "the main environment of scripts/test.sh (tests/integration/server/test_signals.py)",
    "funasr": "the FunASR environment, scripts/envs/funasr.sh (tests/integration/engines/test_funasr_engine.py)",
    "ray": "the main environment of scripts/test.sh (tests/integration/server/test_ray_serve.py)",
    "verl": "the trainer environment, scripts/envs/verl.sh",
    "recipes": "the trainer environment, scripts/envs/verl.sh (tests/integration/trainer/test_recipes.py)",
    "vllm": "GPU machines (docs/scaling.md)",
}
"""Extras a doc may add to a documented environment's line, and where the test run tests each."""


@dataclass(frozen=True)
class Check:
    """A command (bash, run in a fresh folder) and what a user must get from it."""

    command: str
    returncode: int = 0
    says: str = ""
    """Text the output must hold; with a non-zero status, the one line on stderr must hold it."""
    files: tuple[str, ...] = ()
    scorer: bool = False
    stdin: str | None = None
    in_checkout: bool = False
    """Run in the checkout (the test and lint lines), not in a fresh folder."""
    timeout_s: float = 120.0
    one_line: bool = field(default=False)
    """stderr is exactly one line (a refusal naming what to install)."""


SUBCOMMANDS = ("serve", "score", "eval", "validate", "schema", "preflight", "tts-speaker", "export-checkpoint",
               "error-rate")
TRANSCRIPTS = '{"id": "u1", "reference": "Hello, world!", "hypothesis": "hello word"}\n'

CHECKS: dict[str, tuple[Check, ...]] = {
    "client": (
        Check("audio-reward --help", says="error-rate"),
        Check("audio-reward --version", says="audio-reward "),
        *(Check(f"audio-reward {name} --help", says="usage: audio-reward") for name in SUBCOMMANDS),
        Check("audio-reward", returncode=2, says="usage: audio-reward"),
        Check("audio-reward validate {repo}/audio_reward/protocol/examples/valid/verl_omni_v1.json", says="OK"),
        Check("audio-reward schema --out schemas", says="score_request.schema.json"),
        Check("audio-reward error-rate -", stdin=TRANSCRIPTS, says='"cer":0.0909'),
        Check('audio-reward score --url http://127.0.0.1:8000 --text "$(cat examples/speech.txt)" examples/speech.wav',
              files=("examples",), scorer=True, says="score"),
        Check('audio-reward score --url 127.0.0.1:8000 --text "$(cat examples/speech.txt)" examples/speech.wav',
              files=("examples",), scorer=True, says="score"),
        Check("audio-reward serve", returncode=2, one_line=True, says="'server' extra"),
        Check("audio-reward tts-speaker examples/speech.wav --out spk.json", files=("examples",), returncode=2,
              one_line=True, says="--model"),
        Check("audio-reward tts-speaker examples/speech.wav --out spk.json --model .", files=("examples",),
              returncode=1, one_line=True, says="run tts-speaker in the TTS environment"),
        Check("audio-reward export-checkpoint . --out exported", returncode=1, one_line=True,
              says="the trainer or the TTS environment"),
        Check("audio-reward preflight qwen3_tts_grpo", returncode=1, says="run preflight in the trainer environment"),
        Check("audio-reward eval manifest.jsonl --out run --url http://127.0.0.1:8000", files=("manifest.jsonl",),
              returncode=2, one_line=True, says="'.[eval]'"),
    ),
    "server": (
        Check("audio-reward serve --model base", returncode=2, one_line=True, says="'base-model'"),
        Check("audio-reward serve --preset seed-tts-eval-en", returncode=2, one_line=True,
              says="'transformers' extra"),
        Check("audio-reward serve --preset seed-tts-eval-en --engine faster-whisper", returncode=2, one_line=True,
              says="not available offline", timeout_s=180),
        Check("python -m audio_reward.trainer_plugin.recipes.qwen3_tts_grpo.prepare_data examples/speech.txt "
              "--out-dir data", files=("examples",), returncode=2, one_line=True, says="'recipes'"),
        Check("audio-reward eval manifest.jsonl --out run --url http://127.0.0.1:8000", files=("manifest.jsonl",),
              returncode=2, one_line=True, says="'.[eval]'"),
    ),
    "eval": (
        Check("rc=0; audio-reward eval manifest.jsonl --out run --url http://127.0.0.1:9 || rc=$?; test ! -e run; "
              "exit $rc", files=("manifest.jsonl",), returncode=2, one_line=True, says="cannot reach the scorer"),
        Check("audio-reward eval manifest.jsonl --out run --url http://127.0.0.1:8000 --no-progress",
              files=("manifest.jsonl",), scorer=True, says="run/report.html", timeout_s=300),
    ),
    "dev": (
        Check("python -m pytest -q -p no:cacheprovider tests/unit", in_checkout=True, says="passed", timeout_s=600),
        Check("python -m ruff check .", in_checkout=True, says="All checks passed"),
        Check("python -m mypy", in_checkout=True, says="Success", timeout_s=600),
    ),
}
