"""Import-only stand-in for ``torchaudio`` in the tiny Qwen3-TTS test environment.

qwen-tts imports ``torchaudio.compliance.kaldi`` at module level for its 25 Hz
speech tokenizer; torchaudio has no build for the torch used here.  The 12 Hz
path under test never calls it; any call raises.
"""
