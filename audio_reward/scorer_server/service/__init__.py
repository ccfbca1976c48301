"""What the routers call, built once per app from explicit parts (:func:`..app.build_app`).

- :mod:`.pipeline`: :class:`~.pipeline.ScoringPipeline`, decode → prepare → engine client → score.
- :mod:`.transcription`: the OpenAI-compatible transcription API over the same engine client.
- :mod:`.info`: the ``/v1/info`` body.
- :mod:`.engine_client`: :class:`~.engine_client.EngineClient`, the one way into the ASR engine (readiness,
  scheduler, timeout, languages, retried requests joined, scheduler outcomes as server errors).
- :mod:`.signals`: the speaker and quality models beside it, on their own schedulers.
- :mod:`.scheduler`: the schedulers (micro-batches, or straight through).
- :mod:`.dedup`: recent answers by request id, so a retried request is transcribed once.
- :mod:`.offload`: scoring CPU work off the event loop, one thread hop per engine batch.
- :mod:`.prometheus`: the Prometheus metrics of one server.
- :mod:`.audio_files`: audio files the server decodes with FFmpeg.
"""
