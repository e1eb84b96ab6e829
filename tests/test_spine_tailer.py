from __future__ import annotations

import os
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from console.episode.tailer import Tailer


def read_new(tailer: Tailer) -> list[tuple[int, bytes]]:
    """Every complete new non-empty line as (offset, bytes)."""
    out = []
    for base, lines in tailer.batches():
        for line in lines:
            if line:
                out.append((base, line))
            base += len(line) + 1
    return out


def test_holds_back_a_half_written_line(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"a":1}\n{"b":')
    tailer = Tailer(str(path))
    assert read_new(tailer) == [(0, b'{"a":1}')]
    assert read_new(tailer) == []
    with open(path, "ab") as fh:
        fh.write(b'2}\n')
    assert read_new(tailer) == [(8, b'{"b":2}')]


def test_truncated_file_is_read_again(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"aaaa\nbbbb\n")
    tailer = Tailer(str(path))
    assert len(read_new(tailer)) == 2
    path.write_bytes(b"cc\n")  # same inode, shorter
    assert read_new(tailer) == [(0, b"cc")]
    assert tailer.reset == "truncated"


def test_replaced_file_is_read_again(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"one\n")
    tailer = Tailer(str(path))
    assert read_new(tailer) == [(0, b"one")]
    other = tmp_path / "t.jsonl.new"
    other.write_bytes(b"two\nthree\n")
    os.replace(other, path)
    assert read_new(tailer) == [(0, b"two"), (4, b"three")]
    assert tailer.reset == "replaced"


def test_empty_lines_are_skipped_but_offsets_stay_exact(tmp_path):
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"a\n\n\nbb\n")
    assert read_new(Tailer(str(path))) == [(0, b"a"), (4, b"bb")]


def test_batches_split_lines_without_carrying_a_tail(tmp_path, monkeypatch):
    """Each read starts at the first incomplete line of the one before, so batches hold
    whole lines only (empty ones too, for offsets) and the half-written last line waits."""
    import console.episode.tailer as tailer_module

    monkeypatch.setattr(tailer_module, "CHUNK", 64)
    path = tmp_path / "t.jsonl"
    lines = [b"%d:" % i + b"y" * (i * 7 % 50) for i in range(60)] + [b""]
    path.write_bytes(b"\n".join(lines) + b"\n" + b'{"half')
    tailer = Tailer(str(path))
    batches = list(tailer.batches())
    assert len(batches) > 5
    assert [line for _, batch in batches for line in batch] == lines
    for (base, batch), (following, _) in zip(batches, batches[1:]):
        assert following == base + sum(len(line) + 1 for line in batch)
    assert tailer.offset == path.stat().st_size - len(b'{"half')


def test_a_line_longer_than_one_chunk(tmp_path, monkeypatch):
    import console.episode.tailer as tailer_module

    monkeypatch.setattr(tailer_module, "CHUNK", 16)
    path = tmp_path / "t.jsonl"
    long_line = b"x" * 100
    path.write_bytes(b"ab\n" + long_line + b"\ncd\n")
    assert read_new(Tailer(str(path))) == [(0, b"ab"), (3, long_line), (104, b"cd")]


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(min_size=1, max_size=40).map(lambda b: b.replace(b"\n", b"_")), min_size=1, max_size=40),
    seed=st.integers(0, 2**32 - 1),
)
def test_random_chunk_splits_see_every_record_exactly_once(tmp_path_factory, records, seed):
    path = tmp_path_factory.mktemp("tail") / "t.jsonl"
    data = b"".join(r + b"\n" for r in records)
    rng = random.Random(seed)
    tailer = Tailer(str(path))
    seen = []
    position = 0
    with open(path, "wb") as fh:
        while position < len(data):
            step = rng.randint(1, 25)
            fh.write(data[position : position + step])
            fh.flush()
            position += step
            if rng.random() < 0.6:
                seen.extend(line for _, line in read_new(tailer))
    seen.extend(line for _, line in read_new(tailer))
    assert seen == records
