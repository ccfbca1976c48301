"""Write examples/speech.wav, the first clip the README scores, and its text.

The speech is synthesised with the hibari-tts package (Apache-2.0, English, one voice; the dev extra installs it)
with a fixed seed, then resampled to 16 kHz mono PCM16 with soxr so the file stays small. Run from a checkout in
the dev environment:

    .venv/bin/python -m scripts.make_example_clip
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import soundfile as sf
import soxr

from tests.testkit.speech import synth_speech

TEXT = "The quick brown fox jumps over the lazy dog."
OUT = Path(__file__).resolve().parent.parent / "examples"


def main() -> None:
    audio, rate = synth_speech(TEXT)
    audio16 = soxr.resample(audio, rate, 16000).astype(np.float32)
    peak = float(np.max(np.abs(audio16))) or 1.0
    OUT.mkdir(exist_ok=True)
    sf.write(OUT / "speech.wav", audio16 / max(peak, 1.0), 16000, subtype="PCM_16")
    (OUT / "speech.txt").write_text(TEXT + "\n", encoding="utf-8")
    print(f"wrote {OUT / 'speech.wav'} ({len(audio16) / 16000:.2f} s) and {OUT / 'speech.txt'}")


if __name__ == "__main__":
    main()
