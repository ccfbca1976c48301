"""``audio-reward eval``: score a manifest of utterances, report CER/WER like Seed-TTS-eval, compare runs.

- :mod:`.evaluate`: the run (resumable per-utterance rows, the summary);
- :mod:`.compare`: per-utterance deltas between finished runs;
- :mod:`.report`: plots and ``report.html`` (needs the ``eval`` extra);
- :mod:`.recordings`: which file is a run's recording, checked by the hash recorded when it was scored;
- :mod:`.cli`: the command.
"""
