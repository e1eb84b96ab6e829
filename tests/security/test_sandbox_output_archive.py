"""The Ray output unpacker against a crafted pax archive: refused at once, in one line.

The 1.2 KB archive of the report (a pax header of 400,000 digits, a space and 400,000 bytes
without '=') makes Python's tar reader backtrack for minutes. ``sync_archive.unpack`` walks
the archive with ``tar_check`` before ``tarfile`` sees it, as episode archives are walked.
The same file runs on Ray workers as a top-level module beside the wrapper, on Python 3.8:
the package the backend builds carries ``tar_check.py`` beside it, and the check works there.
"""

from __future__ import annotations

import gzip
import io
import os
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile

import pytest

from console.jobs.ray_backend import PACKAGE_DIR, build_package
from console.jobs.sync_archive import ArchiveError, pack, unpack

MB = 1024 * 1024


def tar_member(name: str, data: bytes, kind: bytes = tarfile.REGTYPE) -> bytes:
    info = tarfile.TarInfo(name)
    info.type, info.size = kind, len(data)
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + bytes(-len(data) % 512)


def pax_spin_archive(n: int) -> bytes:
    payload = b"1" * n + b" " + b"x" * n
    raw = tar_member("././@PaxHeader", payload, tarfile.XHDTYPE) + tar_member("profiles/x.txt", b"x=1\n") + bytes(1024)
    return gzip.compress(raw, 9)


def test_a_crafted_pax_archive_is_refused_by_the_unpacker_in_one_line(tmp_path):
    data = pax_spin_archive(400_000)
    assert len(data) < 1300
    dest = tmp_path / "stage"
    dest.mkdir()
    started = time.monotonic()
    with pytest.raises(ArchiveError) as refused:
        unpack(data, str(dest), max_total_bytes=64 * MB)
    assert time.monotonic() - started < 2
    assert str(refused.value) == "archive refused: extended header of 800001 bytes (limit 16384)"
    assert list(dest.iterdir()) == []
    # under the header limit, the malformed record itself is refused before tarfile parses it
    with pytest.raises(ArchiveError, match=r"^archive refused: malformed pax record at byte 0 of its header$"):
        unpack(pax_spin_archive(8000), str(dest), max_total_bytes=64 * MB)


def test_a_bit_flip_in_the_gzip_trailer_is_refused_and_nothing_is_written(tmp_path):
    (tmp_path / "src" / "profiles").mkdir(parents=True)
    (tmp_path / "src" / "profiles" / "a.txt").write_text("kept\n" * 1000)
    good = pack(str(tmp_path / "src"), ["profiles"], max_file_bytes=MB, max_total_bytes=MB).data
    damaged = good[:-6] + bytes([good[-6] ^ 0x01]) + good[-5:]  # the CRC32: tarfile never reads that far
    dest = tmp_path / "stage"
    dest.mkdir()
    with pytest.raises(ArchiveError, match="^archive refused: damaged gzip stream"):
        unpack(damaged, str(dest), max_total_bytes=MB)
    assert list(dest.iterdir()) == []
    assert unpack(good, str(dest), max_total_bytes=MB) == ["profiles/a.txt"]


WORKER_UNPACK = """
import sys, time
sys.path.insert(0, sys.argv[1])
import sync_archive
data = open(sys.argv[2], "rb").read()
started = time.monotonic()
try:
    sync_archive.unpack(data, sys.argv[3], max_total_bytes=1 << 20)
except sync_archive.ArchiveError as exc:
    print("%s|%.2f" % (exc, time.monotonic() - started))
"""


def worker_pythons() -> list[str]:
    """This interpreter and, where one runs here, the oldest one a Ray worker may run."""
    found = shutil.which("python3.8")
    if found is None:
        return [sys.executable]
    # A version manager's shim may exist without that version selected: ask it.
    probe = subprocess.run([found, "-c", "import sys; print(sys.version_info[:2] == (3, 8))"], capture_output=True,
                           text=True, timeout=30)
    return [sys.executable] + ([found] if probe.stdout.strip() == "True" else [])


@pytest.mark.parametrize("python", worker_pythons())
def test_the_shipped_package_checks_archives_on_the_worker(tmp_path, python):
    stage = tmp_path / "stage"
    stage.mkdir()
    package = tmp_path / "package.zip"
    build_package(stage, {"nonce": "0" * 16}, package)
    worker = tmp_path / "worker"
    with zipfile.ZipFile(package) as archive:
        archive.extractall(worker)
    assert (worker / PACKAGE_DIR / "tar_check.py").is_file()
    spin = tmp_path / "spin.tar.gz"
    spin.write_bytes(pax_spin_archive(400_000))
    out = tmp_path / "out"
    out.mkdir()
    env = {key: value for key, value in os.environ.items() if key != "PYTHONPATH"}
    run = subprocess.run([python, "-I", "-c", WORKER_UNPACK, str(worker / PACKAGE_DIR), str(spin), str(out)],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert run.returncode == 0, run.stderr
    message, _, seconds = run.stdout.strip().partition("|")
    assert message == "archive refused: extended header of 800001 bytes (limit 16384)"
    assert float(seconds) < 2 and list(out.iterdir()) == []


def test_a_good_pack_still_round_trips_through_the_check(tmp_path):
    src = tmp_path / "src"
    (src / "profiles" / ("d" * 120)).mkdir(parents=True)
    long_name = f"profiles/{'d' * 120}/{'k' * 90}\N{SNOWMAN}.txt"  # a pax path record
    (src / long_name).write_bytes(b"\x00\x01" * 4096)
    packed = pack(str(src), ["profiles"], max_file_bytes=MB, max_total_bytes=MB)
    with tarfile.open(fileobj=io.BytesIO(packed.data)) as tar:
        assert tar.getnames() == [long_name]
    dest = tmp_path / "stage"
    dest.mkdir()
    assert unpack(packed.data, str(dest), max_total_bytes=MB) == [long_name]
    assert (dest / long_name).read_bytes() == b"\x00\x01" * 4096
