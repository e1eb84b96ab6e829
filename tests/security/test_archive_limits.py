"""Archives are checked whole before anything is unpacked: a damaged gzip stream, a size or
member bomb and a pax header crafted to make Python's tar parser spin are all refused quickly
with a one-line error, and a refused archive leaves nothing in the cache."""

from __future__ import annotations

import gzip
import io
import os
import subprocess
import sys
import tarfile
import time
import zlib
from pathlib import Path

import pytest

from console.episode import archive as archive_module
from console.episode.archive import ArchiveError, open_archive
from console.formats.tar_check import TarLimits, TarRefused, check_tar_gz

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "episodes" / "row_softmax-h200.tar.gz"


@pytest.fixture()
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    archive_module._opened.clear()
    return tmp_path / "cache" / "episcope" / "archives"


def cached_copies(cache: Path) -> list[str]:
    return sorted(p.name for p in cache.iterdir()) if cache.is_dir() else []


def tar_bytes(*members: tuple[tarfile.TarInfo, bytes]) -> bytes:
    buf = io.BytesIO()
    for info, data in members:
        buf.write(info.tobuf(format=tarfile.USTAR_FORMAT))
        buf.write(data + bytes(-len(data) % 512))
    buf.write(bytes(1024))
    return buf.getvalue()


def member(name: str, data: bytes = b"x=1\n", kind: bytes = tarfile.REGTYPE, size: int | None = None):
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, len(data) if size is None else size
    return info, data


def pax_spin_archive(n: int) -> bytes:
    """A pax header of n digits, a space and n non-'=' bytes: the old tarfile pattern
    ``(\\d+) ([^=]+)=`` backtracks over it quadratically."""
    payload = b"1" * n + b" " + b"x" * n
    return gzip.compress(tar_bytes(member("././@PaxHeader", payload, tarfile.XHDTYPE), member("camp/kernel.py")), 9)


@pytest.mark.parametrize("fraction", [i / 24 for i in range(24)] + [-8, -4, -1])
def test_bit_flipped_archive_is_refused_and_not_cached(tmp_path, cache, fraction):
    data = bytearray(EXAMPLE.read_bytes())
    # from the first deflate byte to the last trailer byte: the gzip header before it (mtime,
    # OS, the original file name) carries no data and no checksum
    assert data[3] == 0x08  # the header holds the file name, up to a NUL
    start = data.index(0, 10) + 1
    at = int(start + fraction * (len(data) - start)) if fraction >= 0 else len(data) + int(fraction)
    data[at] ^= 0x10
    bad = tmp_path / "flipped.tar.gz"
    bad.write_bytes(bytes(data))
    with pytest.raises(ArchiveError) as refused:
        open_archive(bad)
    assert "\n" not in str(refused.value)
    assert cached_copies(cache) == []


def test_truncated_archive_is_refused_and_the_good_one_opens(tmp_path, cache):
    bad = tmp_path / "cut.tar.gz"
    bad.write_bytes(EXAMPLE.read_bytes()[:-9])
    with pytest.raises(ArchiveError, match="damaged gzip stream"):
        open_archive(bad)
    assert cached_copies(cache) == []
    campaign = open_archive(EXAMPLE)
    assert (campaign / ".git" / "HEAD").is_file()
    assert len(cached_copies(cache)) == 1


def test_size_bomb_is_refused_from_its_header(tmp_path, cache):
    """A member declaring 2 GiB (a 2.3 MB archive of zeros unpacks to that) is refused at its
    header, before its data is inflated."""
    head = tar_bytes(member("camp/kernel.py"))[:-1024]
    big = tarfile.TarInfo("camp/zeros.bin")
    big.size = 2 << 30
    compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    body = compressor.compress(head + big.tobuf(format=tarfile.GNU_FORMAT))
    zeros = bytes(1 << 20)
    for _ in range(16):  # the first 16 MiB of the bomb's zeros; the refusal comes first
        body += compressor.compress(zeros)
    bomb = tmp_path / "bomb.tar.gz"
    bomb.write_bytes(body + compressor.flush())
    started = time.monotonic()
    with pytest.raises(ArchiveError, match="more than 1073741824 bytes"):
        open_archive(bomb)
    assert time.monotonic() - started < 5
    assert cached_copies(cache) == []


def test_real_bombs_against_the_limits(tmp_path, cache):
    """Inflated bytes and member counts are counted as they come, whatever the headers say."""
    limits = TarLimits(members=50, total_bytes=4 << 20, stream_bytes=5 << 20)
    zeros = tmp_path / "zeros.tar.gz"
    zeros.write_bytes(gzip.compress(tar_bytes(member("camp/zeros.bin", bytes(8 << 20))), 9))
    assert zeros.stat().st_size < 20_000
    with pytest.raises(ArchiveError, match="more than 4194304 bytes"):
        open_archive(zeros, limits)
    trailing = tmp_path / "trailing.tar.gz"  # a small archive followed by inflating padding
    trailing.write_bytes(gzip.compress(tar_bytes(member("camp/kernel.py")) + bytes(8 << 20), 9))
    with pytest.raises(ArchiveError, match="unpacks to more than"):
        open_archive(trailing, limits)
    many = tmp_path / "many.tar.gz"
    many.write_bytes(gzip.compress(tar_bytes(*(member(f"camp/f{i}") for i in range(51))), 9))
    with pytest.raises(ArchiveError, match="more than 50 members"):
        open_archive(many, limits)
    assert cached_copies(cache) == []


def test_pax_spin_archive_is_refused_quickly(tmp_path, cache):
    data = pax_spin_archive(400_000)
    assert len(data) < 1300  # the 1.2 KB archive of the report
    spin = tmp_path / "spin.tar.gz"
    spin.write_bytes(data)
    started = time.monotonic()
    with pytest.raises(ArchiveError, match="extended header of 800001 bytes"):
        open_archive(spin)
    assert time.monotonic() - started < 2
    assert cached_copies(cache) == []
    # under the size limit, the malformed record itself is refused before tarfile parses it
    small = pax_spin_archive(8000)
    with pytest.raises(TarRefused, match="malformed pax record"):
        check_tar_gz(io.BytesIO(small))


def test_pax_keywords_that_move_headers_are_refused():
    size = b"size=0"
    record = b"%d %s\n" % (len(size) + 4, size)
    data = gzip.compress(tar_bytes(member("././@PaxHeader", record, tarfile.XHDTYPE), member("camp/kernel.py")))
    with pytest.raises(TarRefused, match="pax keyword b'size'"):
        check_tar_gz(io.BytesIO(data))
    # what Python's own tarfile writes for a long name passes
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT) as tar:
        info = tarfile.TarInfo("camp/" + "d" * 200 + "/kernel.py\N{SNOWMAN}")
        info.size = 3
        tar.addfile(info, io.BytesIO(b"x=1"))
    buf.seek(0)
    assert check_tar_gz(buf).members == 1


def test_status_of_a_spin_archive_exits_at_once_with_one_line(tmp_path):
    spin = tmp_path / "spin.tar.gz"
    spin.write_bytes(pax_spin_archive(400_000))
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-m", "console.cli", "status", str(spin), "--json"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)
    assert time.monotonic() - started < 20
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1 and "refused" in proc.stderr, proc.stderr
    assert not list((tmp_path / "cache").rglob("kernel.py"))


@pytest.mark.parametrize("kind", [tarfile.DIRTYPE, tarfile.REGTYPE])
def test_an_archive_holding_the_finished_copy_mark_is_refused_in_one_line(tmp_path, cache, kind):
    """``.episcope-unpacked`` is episcope's own mark, written last into a finished copy: an
    archive that brings a member of that name (a directory made writing it fail with a
    traceback; a file would pass for the mark) is refused, and nothing is cached."""
    path = tmp_path / "marked.tar.gz"
    path.write_bytes(gzip.compress(tar_bytes(member("camp/kernel.py"), member(archive_module.DONE_MARKER, b"", kind))))
    with pytest.raises(ArchiveError, match=r"marked\.tar\.gz: member \.episcope-unpacked is the name of episcope's own"):
        open_archive(path)
    assert cached_copies(cache) == []
