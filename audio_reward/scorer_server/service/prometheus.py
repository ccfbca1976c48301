"""Prometheus metrics of one server instance (its own registry, so several
servers in one process, as in tests, never share counters).

Besides the server's own series the registry carries prometheus-client's
process, platform (Python version) and garbage-collector collectors.  The
``_created`` timestamp series are left out of that registry's collection
(prometheus-client's own switch for them is process-wide): Prometheus does not
use them and they made up a third of the exposition.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    GCCollector,
    Histogram,
    Info,
    PlatformCollector,
    ProcessCollector,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from audio_reward import __version__
from audio_reward.protocol import ScoreResponse

from .scheduler import BatchStats

PREFIX = "audio_reward"
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)
_BATCH_AUDIO_BUCKETS = (1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)
_SCORE_BUCKETS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 0.99, 1.0)
_CER_BUCKETS = (0.0, 0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.5, 1.0, 2.0)


class EngineSchedulerCollector(Collector):
    """``audio_reward_engine_scheduler_requests{state=...}``: the engine's own scheduler counts, read at scrape."""

    def __init__(self, stats: Callable[[], Mapping[str, float]]) -> None:
        self._stats = stats

    def collect(self) -> Iterator[GaugeMetricFamily]:
        family = GaugeMetricFamily(
            "audio_reward_engine_scheduler_requests",
            "Requests inside a self-scheduling engine by state, as its own scheduler reports them "
            "(vLLM: running, waiting, unfinished; peak_running, peak_held and finished: since start).",
            labels=("state",))
        for state, value in sorted(self._stats().items()):
            family.add_metric((state,), value)
        yield family


ADMISSION_GAUGES = {
    "queued_audio_seconds": ("audio_reward_queued_audio_seconds", "Seconds of audio waiting for the engine."),
    "throughput": ("audio_reward_engine_throughput_audio_seconds_per_second",
                   "Audio seconds the engine transcribes per wall second, over its recent calls."),
    "estimated_wait_seconds": ("audio_reward_estimated_wait_seconds",
                               "Seconds a request arriving now would wait for the work ahead of it; a request "
                               "whose wait passes request_timeout_s is refused with 429."),
}


class AdmissionCollector(Collector):
    """The admission estimate (docs/server.md, "Overload"), read at scrape; absent until it is measured."""

    def __init__(self, estimate: Callable[[], Mapping[str, float]]) -> None:
        self._estimate = estimate

    def collect(self) -> Iterator[GaugeMetricFamily]:
        values = self._estimate()
        for key, (name, documentation) in ADMISSION_GAUGES.items():
            if key in values:
                yield GaugeMetricFamily(name, documentation, value=values[key])


class CreatedlessRegistry(CollectorRegistry):
    """A registry whose counters, histograms and summaries collect without their ``_created`` series."""

    def collect(self) -> Iterable[Metric]:
        for metric in super().collect():
            # Filtered in place: collectors build their metrics afresh at each collection (a cached one, as the
            # platform collector's, has no _created series to lose).
            created = f"{metric.name}_created"
            metric.samples = [sample for sample in metric.samples if sample.name != created]
            yield metric


class ServerMetrics:
    """Every metric the server exports under the ``audio_reward_`` prefix."""

    def __init__(self) -> None:
        self.registry: CollectorRegistry = CreatedlessRegistry(auto_describe=True)
        r = self.registry
        for collector in (ProcessCollector, PlatformCollector, GCCollector):
            collector(registry=r)
        # Every series below is audio_reward_<name>, in this server's own registry.
        gauge, counter = partial(Gauge, namespace=PREFIX, registry=r), partial(Counter, namespace=PREFIX, registry=r)
        histogram = partial(Histogram, namespace=PREFIX, registry=r)
        self.build = Info("build", "Server version and the engine and model it scores with.", namespace=PREFIX,
                          registry=r)
        self.build.info({"version": __version__, "engine": "", "model": ""})
        self.in_flight = gauge("requests_in_flight", "Scoring and transcription requests being served.")
        self.requests = counter("requests", "HTTP requests by endpoint and status code.", ("endpoint", "status"))
        self.request_latency = histogram("request_latency_seconds", "Wall time of scoring and transcription requests.",
                                         ("endpoint",), buckets=_LATENCY_BUCKETS)
        self.queue_depth = gauge("queue_depth", "Utterances waiting for the engine.")
        self.batch_size = histogram("batch_size", "Utterances per engine call.", buckets=_BATCH_BUCKETS)
        self.batch_audio_seconds = histogram("batch_audio_seconds", "Seconds of audio per engine call.",
                                             buckets=_BATCH_AUDIO_BUCKETS)
        self.score = histogram("score", "Reward of each scored utterance.", buckets=_SCORE_BUCKETS)
        self.cer = histogram("cer", "Character error rate of each scored utterance (before clipping).",
                             buckets=_CER_BUCKETS)
        self.transcriptions = counter(
            "transcriptions", "OpenAI-compatible transcriptions by outcome (ok or an error code).", ("outcome",))
        self.engine_latency = histogram("engine_latency_seconds", "Wall time of one engine call.",
                                        buckets=_LATENCY_BUCKETS)
        self.engine_failures = counter("engine_failures", "Engine calls that raised.")
        self.audio_seconds = counter("audio_seconds", "Seconds of audio transcribed.")
        self.items = counter("items", "Scored utterances by outcome (ok or an error code).", ("outcome",))
        self.ready = gauge("ready", "1 once the model is loaded and warmed up.")
        self.signal_latency = histogram("signal_latency_seconds", "Wall time of one speaker or quality model call.",
                                        ("signal",), buckets=_LATENCY_BUCKETS)
        self.signal_batch_size = histogram("signal_batch_size", "Utterances per speaker or quality model call.",
                                           ("signal",), buckets=_BATCH_BUCKETS)
        self.signal_failures = counter("signal_failures", "Speaker or quality model calls that raised.", ("signal",))

    def set_build(self, *, engine: str, model: str) -> None:
        self.build.info({"version": __version__, "engine": engine, "model": model})

    def observe_result(self, result: ScoreResponse) -> None:
        """Count one scored utterance and record its score and CER."""
        self.items.labels("ok").inc()
        self.score.observe(result.score)
        if result.cer is not None:
            self.cer.observe(result.cer)

    def observe_signal_batch(self, signal: str, stats: BatchStats) -> None:
        """One speaker or quality model call."""
        self.signal_latency.labels(signal).observe(stats.engine_seconds)
        self.signal_batch_size.labels(signal).observe(stats.size)
        if stats.failed:
            self.signal_failures.labels(signal).inc()

    def observe_batch(self, stats: BatchStats) -> None:
        self.batch_size.observe(stats.size)
        self.batch_audio_seconds.observe(stats.audio_seconds)
        self.engine_latency.observe(stats.engine_seconds)
        if stats.failed:
            self.engine_failures.inc()
        else:
            self.audio_seconds.inc(stats.audio_seconds)
