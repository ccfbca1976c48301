"""OpenAI-compatible audio API: transcriptions and models, on the scorer's batcher and engine."""
