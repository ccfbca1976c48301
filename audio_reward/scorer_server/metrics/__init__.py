"""Prometheus metrics of one server instance (its own registry, so several
servers in one process, as in tests, never share counters)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

from ..batcher import BatchStats

_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServerMetrics:
    """Every metric the server exports under the ``audio_reward_`` prefix."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.requests = Counter(
            "audio_reward_requests", "HTTP requests by endpoint and status code.", ("endpoint", "status"), registry=r
        )
        self.request_latency = Histogram(
            "audio_reward_request_latency_seconds", "Wall time of scoring requests.", ("endpoint",),
            buckets=_LATENCY_BUCKETS, registry=r,
        )
        self.queue_depth = Gauge("audio_reward_queue_depth", "Utterances waiting for the engine.", registry=r)
        self.batch_size = Histogram(
            "audio_reward_batch_size", "Utterances per engine call.", buckets=_BATCH_BUCKETS, registry=r
        )
        self.engine_latency = Histogram(
            "audio_reward_engine_latency_seconds", "Wall time of one engine call.", buckets=_LATENCY_BUCKETS, registry=r
        )
        self.engine_failures = Counter("audio_reward_engine_failures", "Engine calls that raised.", registry=r)
        self.audio_seconds = Counter("audio_reward_audio_seconds", "Seconds of audio transcribed.", registry=r)
        self.items = Counter(
            "audio_reward_items", "Scored utterances by outcome (ok or an error code).", ("outcome",), registry=r
        )
        self.ready = Gauge("audio_reward_ready", "1 once the model is loaded and warmed up.", registry=r)

    def observe_batch(self, stats: BatchStats) -> None:
        self.batch_size.observe(stats.size)
        self.engine_latency.observe(stats.engine_seconds)
        if stats.failed:
            self.engine_failures.inc()
        else:
            self.audio_seconds.inc(stats.audio_seconds)
