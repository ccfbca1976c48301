"""Our CER/WER equal jiwer's on the same normalized strings, over the whole parity battery.

Runs in the main environment (jiwer 4) and in the Seed-TTS-eval one (jiwer 3).
For Chinese the units are characters: our CER and WER both equal jiwer's WER
on the spaced-out text (and jiwer's CER on the text without its spaces).
"""

from __future__ import annotations

import jiwer
import pytest

from audio_reward.scoring import (
    EmptyReferenceError,
    compare_texts,
    get_normalizer,
)
from tests.testkit.extras import normalizer_params
from tests.testkit.parity_battery import CASES

MODES = normalizer_params()


@pytest.mark.parametrize("name", MODES)
def test_rates_equal_jiwer_on_normalized_strings(name: str) -> None:
    normalizer = get_normalizer(name)
    mismatches = []
    scored = 0
    for ref, hyp, lang in CASES:
        try:
            c = compare_texts(ref, hyp, normalizer=normalizer, language=lang)
        except EmptyReferenceError:
            continue
        scored += 1
        r, h = c.normalized_reference, c.normalized_hypothesis
        if c.char_level:
            expected = (jiwer.cer(r.replace(" ", ""), h.replace(" ", "")), jiwer.wer(r, h))
            got = (c.rates.cer, c.rates.wer)
            if got != expected or c.rates.cer != jiwer.wer(r, h):
                mismatches.append((ref, hyp, got, expected))
        elif (c.rates.cer, c.rates.wer) != (jiwer.cer(r, h), jiwer.wer(r, h)):
            mismatches.append((ref, hyp, (c.rates.cer, c.rates.wer), (jiwer.cer(r, h), jiwer.wer(r, h))))
    assert scored >= 300
    assert mismatches == [], f"{len(mismatches)} of {scored} differ, first: {mismatches[:10]}"
