"""The toy task's reward cannot be gamed: on both engines of ``scripts/train_cpu.sh`` (the instant engine and
Whisper tiny.en on espeak-ng speech), the product's own CER reward gives the asked word 1, and an empty answer,
a padded one or a repeated one less (issue 36: an empty answer used to score 0.556 on the instant engine, and
only the first word counted)."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest

from audio_reward.scorer_client import ScorerClient
from audio_reward.trainer_plugin.toy_task.speech import HELDOUT_WORDS, TRAIN_WORDS, speak
from tests.testkit.server import running_server

ANSWERS = {"right": ["planet"], "empty": [], "padded": ["planet", "please"], "repeated": ["planet", "planet"],
           "wrong": ["market"]}


def scores(url: str, kind: str) -> dict[str, float]:
    with ScorerClient(url) as client:
        return {name: client.score(*speak(words, kind), "planet").score for name, words in ANSWERS.items()}


@pytest.fixture(scope="module")
def whisper_url() -> Iterator[str]:
    if shutil.which("espeak-ng") is None:
        pytest.skip("espeak-ng (apt-get install -y espeak-ng)")
    with running_server(model="tiny.en") as scorer:
        yield scorer.url


def test_instant_engine_rewards_the_word_and_nothing_else() -> None:
    with running_server(instant=True) as scorer:
        got = scores(scorer.url, "instant")
        # the start-up line names what /v1/info names, not the --model default (issue 40, finding 9)
        assert "(engine instant, model instant-bench-engine, device" in scorer.log_tail()
    assert got["right"] == 1.0
    assert got["empty"] == 0.0 and got["padded"] == 0.0 and got["repeated"] == 0.0
    assert got["wrong"] < 0.5


def test_whisper_on_espeak_rewards_the_word_and_nothing_else(whisper_url: str) -> None:
    got = scores(whisper_url, "espeak")
    assert got["right"] == 1.0
    assert got["empty"] == 0.0 and got["padded"] == 0.0 and got["repeated"] == 0.0
    assert got["wrong"] < 0.5


def test_whisper_understands_the_toy_words_said_alone(whisper_url: str) -> None:
    """The task is learnable only where the ASR can hear the asked word: each is transcribed exactly."""
    with ScorerClient(whisper_url) as client:
        items = [(*speak([word], "espeak"), word) for word in (*TRAIN_WORDS, *HELDOUT_WORDS)]
        results = client.score_many(items)
    missed = {word: r for (_, _, word), r in zip(items, results, strict=True) if getattr(r, "score", None) != 1.0}
    # all 48 here, in both environments; another CPU's kernels may mishear a word in a batch now and then,
    # which the loop takes as reward noise, not a word it cannot learn
    assert len(missed) <= 2, missed
