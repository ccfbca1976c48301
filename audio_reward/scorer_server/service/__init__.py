"""What the routers call, built once per app from explicit parts (:func:`..app.build_app`).

- :mod:`.pipeline`: :class:`~.pipeline.ScoringPipeline`, decode → resample → submit → score.
- :mod:`.dedup`: recent answers by request id, so a retried request is transcribed once.
- :mod:`.scheduler`: the engine's scheduler (micro-batches, or straight through).
- :mod:`.offload`: scoring CPU work off the event loop, one thread hop per engine batch.
- :mod:`.prometheus`: the Prometheus metrics of one server.
- :mod:`.readiness`: whether the engine is loaded, and its scheduler once it is.
- :mod:`.info`: the ``/v1/info`` body.
- :mod:`.transcription`: the OpenAI-compatible transcription API on the same scheduler.
"""
