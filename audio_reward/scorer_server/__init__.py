"""The scorer server: speech → ASR → CER/WER → reward over HTTP, protocol v1.

Where each piece lives, from the command line to the reward:

- ``config`` / ``settings``: one typed configuration (:class:`~.config.ServerConfig`
  holds the fields; :class:`~.settings.ServerSettings` adds ``AUDIO_REWARD_SERVER_*``).
- ``cli`` (``audio-reward serve``) and ``flags``: flags generated from the settings;
  ``ray_serve`` and ``scale_out``: the same app, one replica per GPU, on Ray Serve.
- ``app``: :func:`~.app.build_app` builds every part once and the lifespan loads the engine.
- ``http/``: thin FastAPI routers per feature (``score``, ``openai``, ``info``, ``health``,
  ``metrics``) with their middleware, error handlers, auth, body reading and uvicorn set-up.
- ``service/``: what the routers call: ``pipeline`` (decode → resample → submit → score),
  ``dedup`` (retried requests answered once), ``scheduler`` (the engine's scheduler),
  ``offload``, ``prometheus``, ``readiness``, ``info``, ``transcription`` (the OpenAI-compatible API).
- ``engines/``: the ASR engines behind one interface; ``errors``: the error tree.
"""
