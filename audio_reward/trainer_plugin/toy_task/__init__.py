"""A seeded toy task on which GRPO, through real verl on a CPU, teaches a policy to be understood by an ASR.

The policy is a tiny Qwen3 over a word vocabulary (:mod:`.policy`), pretrained
like a base model to say the asked word and, more often than not, to pad it
(:mod:`.pretrain`).  Each prompt asks for one word ("say planet"); the response
is turned into audio by :class:`.speak_agent.SpeakAgentLoop`, which puts the
waveform where verl-omni's TTS rollout puts it, and the reward is the scorer's
own CER reward of what it heard against the word.  Two kinds of speech
(:mod:`.speech`):

- ``instant``: a tone carrying the words said, which the scorer's instant
  engine reads back at once;
- ``espeak``: espeak-ng speaks the response, and the scorer's real ASR
  (``--model tiny.en``) transcribes it.

An empty answer scores 0 and padding costs CER on both.  Training prompts ask
for :data:`.speech.TRAIN_WORDS`; validation and the before/after evaluation
for :data:`.speech.HELDOUT_WORDS`, which no training prompt names.
``scripts/train_cpu.sh`` runs it through verl.
"""
