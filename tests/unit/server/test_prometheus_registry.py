"""The server's metrics registry leaves out ``_created`` series without switching them off process-wide."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from prometheus_client import CollectorRegistry, Counter, generate_latest

from audio_reward.scorer_server.service.prometheus import ServerMetrics
from audio_reward.scorer_server.service.scheduler import BatchStats


def test_importing_the_metrics_module_leaves_prometheus_client_alone() -> None:
    # A fresh interpreter: in this one the module is imported already.
    code = textwrap.dedent("""
        from prometheus_client import CollectorRegistry, Counter, generate_latest
        import audio_reward.scorer_server.service.prometheus  # noqa: F401
        registry = CollectorRegistry()
        Counter("other_library_events", "a counter another library registers", registry=registry).inc()
        print(generate_latest(registry).decode())
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "other_library_events_created" in out, out


def test_the_server_registry_has_no_created_series() -> None:
    metrics = ServerMetrics()
    metrics.requests.labels("/v1/score", "200").inc()
    metrics.request_latency.labels("/v1/score").observe(0.1)
    metrics.observe_batch(BatchStats(size=2, audio_seconds=3.0, engine_seconds=0.2, failed=False))
    text = generate_latest(metrics.registry).decode()
    assert "_created" not in text
    assert 'audio_reward_requests_total{endpoint="/v1/score",status="200"} 1.0' in text
    assert "audio_reward_batch_size_bucket" in text and "audio_reward_request_latency_seconds_count" in text
    other = CollectorRegistry()
    Counter("beside_the_server", "a counter in another registry", registry=other).inc()
    assert "beside_the_server_created" in generate_latest(other).decode()
