"""What tests and benchmarks read off a running server: its memory and its Prometheus metrics."""

from __future__ import annotations

import re
import threading

import httpx


class RssSampler:
    """Samples a process's resident memory in a thread; ``peak`` and ``samples`` in bytes."""

    def __init__(self, pid: int, interval_s: float = 0.02) -> None:
        import psutil

        self._proc = psutil.Process(pid)
        self.interval_s = interval_s
        self.baseline = self._proc.memory_info().rss
        self.peak = self.baseline
        self.samples: list[int] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="rss-sampler", daemon=True)

    def _run(self) -> None:
        import psutil

        while not self._stop.is_set():
            try:
                rss = self._proc.memory_info().rss
            except psutil.Error:
                return  # the process is gone (a kill test): keep what was seen
            self.samples.append(rss)
            self.peak = max(self.peak, rss)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> RssSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(5)


_METRIC_LINE = re.compile(r'^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>\S+)$')


def read_metrics(url: str, api_key: str | None = None) -> dict[str, float]:
    """The server's Prometheus metrics as ``{'name{labels}': value}``."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    text = httpx.get(f"{url}/metrics", headers=headers, timeout=10).text
    out: dict[str, float] = {}
    for line in text.splitlines():
        m = _METRIC_LINE.match(line)
        if m:
            out[f"{m['name']}{{{m['labels'] or ''}}}"] = float(m["value"])
    return out


def items_ok(url: str, api_key: str | None = None) -> int:
    """Items the server scored successfully so far."""
    return int(read_metrics(url, api_key).get('audio_reward_items_total{outcome="ok"}', 0))


def rss_bound_bytes(baseline: int, max_queue: int, body_bytes: int) -> int:
    """What a server may grow to: its idle size, plus a fixed allowance, plus per queued request
    its body and the copies decoding makes (JSON text, raw bytes, float32, 16 kHz audio) several times over."""
    return baseline + 96 * 2**20 + max_queue * 16 * body_bytes
