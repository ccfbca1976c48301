"""The TTS recipe's prepare_data: a fixed sampling seed on every validation row, and no per-row voice the
recipe's rollout would drop."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from audio_reward.trainer_plugin.recipes.qwen3_tts_grpo import prepare_data

pq = pytest.importorskip("pyarrow.parquet", reason="prepare_data writes parquet with pyarrow (the recipes extra)")


def write_jsonl(path: Path, records: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


def sentences(n: int) -> list[dict[str, object]]:
    return [{"id": f"s{i}", "text": f"Sentence number {i} is spoken aloud."} for i in range(n)]


def test_validation_rows_carry_a_generation_seed_fixed_by_seed_and_id(tmp_path: Path) -> None:
    src = write_jsonl(tmp_path / "in.jsonl", sentences(8))
    assert prepare_data.main([str(src), "--out-dir", str(tmp_path / "a"), "--val-size", "3"]) == 0
    val = pq.read_table(tmp_path / "a" / "val.parquet").to_pylist()
    train = pq.read_table(tmp_path / "a" / "train.parquet").to_pylist()
    seeds = {r["extra_info"]["index"]: r["extra_info"]["generation_seed"] for r in val}
    assert len(seeds) == 3 and len(set(seeds.values())) == 3
    assert all(isinstance(s, int) and 0 <= s < 2**31 - 1 for s in seeds.values())
    assert all(r["extra_info"].get("generation_seed") is None for r in train)  # training samples stay random
    assert seeds == {rid: prepare_data.generation_seed(0, rid) for rid in seeds}
    # a row's seed depends on --seed and its id alone, not on its place in the file
    shuffled = write_jsonl(tmp_path / "shuffled.jsonl", sentences(8)[::-1])
    assert prepare_data.main([str(shuffled), "--out-dir", str(tmp_path / "b"), "--val-size", "3"]) == 0
    for row in pq.read_table(tmp_path / "b" / "val.parquet").to_pylist():
        assert row["extra_info"]["generation_seed"] == prepare_data.generation_seed(0, row["extra_info"]["index"])
    # another --seed draws other seeds
    assert prepare_data.generation_seed(1, "s0") != prepare_data.generation_seed(0, "s0")


@pytest.mark.parametrize("voice", [{"ref_audio": "voice.wav"}, {"ref_text": "hello"},
                                   {"ref_audio": "voice.wav", "ref_text": "hello"}])
def test_a_per_row_voice_is_refused_in_one_line_before_anything_is_written(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], voice: dict[str, str]) -> None:
    (tmp_path / "voice.wav").write_bytes(b"RIFF")
    records = sentences(4)
    records[2] = {**records[2], **{k: str(tmp_path / v) if k == "ref_audio" else v for k, v in voice.items()}}
    src = write_jsonl(tmp_path / "in.jsonl", records)
    assert prepare_data.main([str(src), "--out-dir", str(tmp_path / "out"), "--val-size", "1"]) == 2
    [line] = capsys.readouterr().err.splitlines()
    fields = "/".join(k for k in ("ref_audio", "ref_text") if k in voice)
    assert line.startswith(f"prepare_data: record s2: {fields} gives the row a voice of its own, which the recipe "
                           "would drop: verl-omni's qwen3_tts_rl speaks every row in the one voice of "
                           "tts_spk_embed_path (SPK_EMBED_PATH)")
    assert "audio-reward tts-speaker REF.wav --out SPK.json" in line
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())
