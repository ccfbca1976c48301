"""Per-utterance signals beside the ASR engine: speaker similarity and speech quality.

Each signal has its own small interface and engines, selected by a server
setting (``--speaker-model``, ``--quality-model``; ``none`` turns it off):

- :mod:`.speaker`: :class:`~.speaker.SpeakerEncoder` embeds utterances in a batch
  (resemblyzer's GE2E encoder, offline; transformers ``WavLMForXVector`` from the hub);
- :mod:`.quality`: :class:`~.quality.QualityScorer` predicts DNSMOS in a batch
  (speechmos's ONNX models, offline);
- :mod:`.references`: the bounded store of registered reference embeddings.

The models run on their own thread (a CPU pool or a GPU device, per setting) and
are fed by the same micro-batch scheduler as the ASR engine (:mod:`..service.signals`).
"""
