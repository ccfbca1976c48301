"""audio-reward: reward scoring for audio RL."""

__version__ = "0.1.0"
