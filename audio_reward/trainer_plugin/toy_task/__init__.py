"""A seeded toy task on which GRPO visibly raises the audio reward within minutes, on a CPU.

The policy is a tiny random Qwen3 over a word vocabulary (:mod:`.policy`).  Each
prompt asks it to say one colour word ("say green"); its response is turned
into audio by :class:`.speak_agent.SpeakAgentLoop`, which puts the waveform
where verl-omni's TTS rollout puts it, and the reward is how well the scorer's
transcript matches the target text.  Two kinds of speech (:mod:`.speech`):

- ``instant``: a short tone whose first sample carries a number for the
  scorer's instant engine, which answers ``item <number>`` at once; each word
  has its own number, so the right word scores 1 and another one about 0.56;
- ``espeak``: espeak-ng speaks the response, and the scorer's real ASR
  (``--model tiny.en``) transcribes it.

A random policy says the right word about one time in ten.  By default every
prompt asks for the same word, and GRPO raises the reward within a dozen
steps; with several target words (``--targets``) the policy must also learn to
copy the word from the prompt, which takes a tiny random model far longer.
``scripts/train_cpu.sh`` runs it through verl.
"""
