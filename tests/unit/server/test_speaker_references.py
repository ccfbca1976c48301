"""The speaker reference store: bounded in count, bytes and age, least recently used out first."""

from __future__ import annotations

import tracemalloc

import numpy as np

from audio_reward.scorer_server.signals.references import SpeakerReferenceStore, entry_bytes, reference_id


def _embedding(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(256).astype(np.float32)


def test_ten_thousand_registrations_stay_within_the_byte_bound() -> None:
    bound = 2 * 2**20
    store = SpeakerReferenceStore(max_entries=100_000, max_bytes=bound, ttl_s=3600)
    tracemalloc.start()
    try:
        for i in range(10_000):
            store.put(f"{i:064x}", _embedding(i))
            assert store.bytes <= bound
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert 0 < len(store) < 10_000 and store.evictions == 10_000 - len(store)
    assert store.bytes == sum(entry_bytes(f"{i:064x}", _embedding(i)) for i in range(10_000 - len(store), 10_000))
    assert held < 1.5 * bound  # what the store holds, measured, is near what it counts
    assert store.get(f"{9_999:064x}") is not None and store.get(f"{0:064x}") is None


def test_least_recently_used_goes_first_and_a_read_counts_as_use() -> None:
    store = SpeakerReferenceStore(max_entries=2, max_bytes=2**20, ttl_s=3600)
    store.put("a", _embedding(1))
    store.put("b", _embedding(2))
    assert store.get("a") is not None  # a is now the most recent
    store.put("c", _embedding(3))
    assert store.get("b") is None and store.get("a") is not None and store.get("c") is not None


def test_an_entry_unused_for_the_ttl_is_evicted() -> None:
    now = [0.0]
    store = SpeakerReferenceStore(max_entries=10, max_bytes=2**20, ttl_s=60, clock=lambda: now[0])
    store.put("a", _embedding(1))
    store.put("b", _embedding(2))
    now[0] = 50.0
    assert store.get("a") is not None
    now[0] = 100.0
    assert store.get("b") is None and store.get("a") is not None
    now[0] = 161.0
    assert store.get("a") is None and len(store) == 0 and store.bytes == 0


def test_kept_embeddings_are_read_only_copies_and_ids_name_the_samples() -> None:
    store = SpeakerReferenceStore(max_entries=10, max_bytes=2**20, ttl_s=60)
    given = _embedding(1)
    store.put("a", given)
    given[:] = 0
    kept = store.get("a")
    assert kept is not None and kept.any() and not kept.flags.writeable
    audio = np.linspace(-1, 1, 16_000, dtype=np.float32)
    assert reference_id(audio) == reference_id(audio.astype(np.float64)) != reference_id(audio[:-1])
    assert len(reference_id(audio)) == 64
