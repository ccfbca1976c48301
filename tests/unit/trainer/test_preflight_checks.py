"""Pre-flight checks of the reward block: one line per problem, each check reporting its own."""

from __future__ import annotations

import os

import pytest

from audio_reward.trainer_plugin import preflight


@pytest.fixture(autouse=True)
def no_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [k for k in os.environ if k.startswith("AUDIO_REWARD_")]:
        monkeypatch.delenv(name)


def config(**block: object) -> dict[str, object]:
    return {"reward": {"reward_manager": {"name": "audio_score"}, "audio_reward": block},
            "algorithm": {"adv_estimator": "grpo"}}


def test_a_missing_url_is_the_scorer_checks_and_the_rest_is_still_checked() -> None:
    cfg = config(failure_policy="mask")
    (wiring,) = preflight.check_reward_wiring(cfg)
    assert not wiring.ok
    assert wiring.message == "failure_policy=mask needs algorithm.adv_estimator in ['grpo_masked'], got grpo"
    (scorer,) = preflight.check_server(cfg)
    assert not scorer.ok
    assert scorer.message == ("reward.audio_reward: no scorer URL: "
                              "set reward.audio_reward.server_url (or AUDIO_REWARD_URL)")


def test_a_bad_value_is_one_line_naming_the_key() -> None:
    (wiring,) = preflight.check_reward_wiring(config(server_url="http://a:1", timeout="abc"))
    assert not wiring.ok and "\n" not in wiring.message
    assert wiring.message.startswith("reward.audio_reward: timeout: Input should be a valid number")


def verl_omni_config(server_url: str) -> dict[str, object]:
    return {"reward": {"custom_reward_function": {
        "path": "pkg://verl_omni.utils.reward_score.audio_http_scorer_client",
        "reward_kwargs": {"server_url": server_url}}}}


@pytest.mark.parametrize("url", ["http://a:1/score", "http://a:1/score/", "http://a:1/v1/score", "http://a:1"])
def test_verl_omni_s_scorer_is_asked_for_info_at_its_root(url: str) -> None:
    asked: list[str] = []

    def info(base: str) -> dict[str, object]:
        asked.append(base)
        return {"protocol_version": "1.0", "engine": {"model_id": "m"}}

    (scorer,) = preflight.check_server(verl_omni_config(url), info_fn=info)
    assert scorer.ok and asked == ["http://a:1"]


def test_verl_omni_s_bad_url_names_its_key() -> None:
    (scorer,) = preflight.check_server(verl_omni_config("ftp://a/score"))
    assert not scorer.ok
    assert scorer.message == ("reward.custom_reward_function.reward_kwargs.server_url: scorer URL 'ftp://a/score' "
                              "has an unsupported protocol 'ftp://': use http:// or https://")


def gpu_config(gpus: int) -> dict[str, object]:
    return {**config(server_url="http://127.0.0.1:8000"), "trainer": {"n_gpus_per_node": gpus}}


def test_a_scorer_on_a_training_gpu_is_refused() -> None:
    problem = preflight.colocation_problem("http://127.0.0.1:8000", "cuda:0", gpu_config(8), gpus=8)
    assert problem is not None and "takes all 8 GPUs, so the two share one" in problem and "NUM_GPUS=7" in problem
    # a GPU left over for it, a CPU scorer, or a scorer on another machine share nothing
    assert preflight.colocation_problem("http://127.0.0.1:8000", "cuda:0", gpu_config(7), gpus=8) is None
    assert preflight.colocation_problem("http://127.0.0.1:8000", "cpu", gpu_config(8), gpus=8) is None
    assert preflight.colocation_problem("http://scorer.invalid:8000", "cuda", gpu_config(8), gpus=8) is None


def test_the_check_reads_the_device_from_the_scorers_info() -> None:
    info = {"protocol_version": "1", "engine": {"model_id": "m", "device": "cuda"}}
    (scorer,) = preflight.check_server(gpu_config(8), info_fn=lambda url: info)
    # this machine lists no GPU (no nvidia-smi), so nothing is shared; with eight, the scorer's would be one of them
    assert scorer.ok == (preflight.machine_gpus() is None)


def test_diffusion_estimators_are_refused() -> None:
    (check,) = preflight.check_group_size({"algorithm": {"adv_estimator": "flow_grpo"},
                                           "actor_rollout_ref": {"rollout": {"n": 8}}})
    assert not check.ok and "verl-omni's estimator for diffusion rollouts" in check.message
