"""The framed output archive of remote jobs: packing, unpacking (hostile archives included),
framing in a streamed log, and the wrapper that produces it, run here as a plain script."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console.jobs import sync_archive
from console.jobs.sync_archive import ArchiveError, FrameReader, frame, pack, snapshot, unpack

WRAPPER = Path(__file__).resolve().parent.parent / "console" / "jobs" / "ray_wrapper.py"
MB = 1024 * 1024


def write(path: Path, data: bytes | str, mode: int = 0o644) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    path.chmod(mode)
    return path


def tar_of(*entries: tarfile.TarInfo, payload: dict | None = None) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for entry in entries:
            data = (payload or {}).get(entry.name)
            tar.addfile(entry, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def file_entry(name: str, data: bytes) -> tarfile.TarInfo:
    entry = tarfile.TarInfo(name)
    entry.size = len(data)
    return entry


# -- pack / unpack ---------------------------------------------------------------------------


def test_round_trip_keeps_new_and_changed_files_only(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    write(src / "profiles" / "kept.txt", "staged, untouched")
    write(src / "profiles" / "changed.txt", "before")
    write(src / "kernel.py", "not a sync path")
    before = snapshot(str(src), ["profiles"])
    write(src / "profiles" / "changed.txt", "after!")
    write(src / "profiles" / "shape-0" / "run.sh", "#!/bin/sh\n", 0o755)
    write(src / "out.json", "{}")

    packed = pack(str(src), ["profiles", "out.json", "missing"], max_file_bytes=MB, max_total_bytes=MB, before=before)
    assert packed.members == ["profiles/changed.txt", "profiles/shape-0/run.sh", "out.json"]
    assert packed.refused == []

    written = unpack(packed.data, str(dst), max_total_bytes=MB)
    assert written == packed.members
    assert (dst / "profiles" / "changed.txt").read_text() == "after!"
    assert os.stat(dst / "profiles" / "shape-0" / "run.sh").st_mode & 0o777 == 0o755
    assert os.stat(dst / "out.json").st_mode & 0o777 == 0o644
    assert not (dst / "profiles" / "kept.txt").exists()
    assert not (dst / "kernel.py").exists()


def test_pack_is_deterministic(tmp_path):
    write(tmp_path / "profiles" / "a.txt", "a")
    one = pack(str(tmp_path), ["profiles"], max_file_bytes=MB, max_total_bytes=MB)
    two = pack(str(tmp_path), ["profiles"], max_file_bytes=MB, max_total_bytes=MB)
    assert one.data == two.data and one.sha256 == two.sha256


def test_pack_refuses_links_special_files_and_oversized_files(tmp_path):
    outside = write(tmp_path / "secret.txt", "host file")
    root = tmp_path / "root"
    write(root / "profiles" / "ok.txt", "ok")
    write(root / "profiles" / "big.bin", b"x" * 2048)
    (root / "profiles" / "link.txt").symlink_to(outside)
    (root / "profiles" / "dirlink").symlink_to(tmp_path)
    os.mkfifo(root / "profiles" / "pipe")
    (root / "linked").symlink_to(root / "profiles")

    packed = pack(str(root), ["profiles", "linked/ok.txt", "../secret.txt"], max_file_bytes=1024, max_total_bytes=MB)
    assert packed.members == ["profiles/ok.txt"]
    reasons = {item["path"]: item["reason"] for item in packed.refused}
    assert reasons["profiles/link.txt"] == "symbolic link"
    assert reasons["profiles/dirlink"] == "symbolic link"
    assert reasons["profiles/pipe"] == "not a regular file"
    assert reasons["linked"] == "symbolic link"
    assert "over --max-output-file-mb" in reasons["profiles/big.bin"]
    assert "'..'" in reasons["../secret.txt"]
    with tarfile.open(fileobj=io.BytesIO(packed.data)) as tar:
        assert tar.getnames() == ["profiles/ok.txt"]


def test_pack_stops_at_the_archive_limit(tmp_path):
    for index in range(4):
        write(tmp_path / "profiles" / f"{index}.bin", bytes([index]) * 400)
    packed = pack(str(tmp_path), ["profiles"], max_file_bytes=MB, max_total_bytes=1000)
    assert packed.members == ["profiles/0.bin", "profiles/1.bin"]
    assert [item["path"] for item in packed.refused] == ["profiles/2.bin", "profiles/3.bin"]
    assert "would pass" in packed.refused[0]["reason"]


@pytest.mark.parametrize(
    "name",
    ["/etc/passwd", "../escape.txt", "profiles/../../escape.txt", "a//b", "./a", "a\\b", ""],
)
def test_unpack_refuses_bad_member_names(tmp_path, name):
    data = tar_of(file_entry(name, b"evil"), payload={name: b"evil"})
    with pytest.raises(ArchiveError):
        unpack(data, str(tmp_path / "dst"), max_total_bytes=MB)
    assert not (tmp_path / "escape.txt").exists()


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.CHRTYPE, tarfile.FIFOTYPE])
def test_unpack_refuses_links_and_special_files(tmp_path, kind):
    good = file_entry("profiles/good.txt", b"good")
    bad = tarfile.TarInfo("profiles/bad")
    bad.type = kind
    bad.linkname = "/etc/passwd"
    data = tar_of(good, bad, payload={"profiles/good.txt": b"good"})
    with pytest.raises(ArchiveError, match="link|special"):
        unpack(data, str(tmp_path), max_total_bytes=MB)
    assert not (tmp_path / "profiles").exists()  # nothing written before the whole was checked


def test_unpack_refuses_writing_through_a_link_in_the_destination(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    dst = tmp_path / "dst"
    dst.mkdir()
    (dst / "profiles").symlink_to(elsewhere)
    data = tar_of(file_entry("profiles/x.txt", b"x"), payload={"profiles/x.txt": b"x"})
    with pytest.raises(ArchiveError, match="link"):
        unpack(data, str(dst), max_total_bytes=MB)
    assert list(elsewhere.iterdir()) == []


def test_unpack_refuses_duplicates_file_under_file_and_replacing_a_directory(tmp_path):
    dup = tar_of(file_entry("a.txt", b"1"), file_entry("a.txt", b"2"), payload={"a.txt": b"1"})
    with pytest.raises(ArchiveError, match="twice"):
        unpack(dup, str(tmp_path), max_total_bytes=MB)
    nested = tar_of(file_entry("a", b"1"), file_entry("a/b", b"2"), payload={"a": b"1", "a/b": b"2"})
    with pytest.raises(ArchiveError, match="under the file"):
        unpack(nested, str(tmp_path), max_total_bytes=MB)
    (tmp_path / "profiles").mkdir()
    over_dir = tar_of(file_entry("profiles", b"1"), payload={"profiles": b"1"})
    with pytest.raises(ArchiveError, match="directory"):
        unpack(over_dir, str(tmp_path), max_total_bytes=MB)


def test_unpack_refuses_an_archive_over_the_limit_before_decompressing_it(tmp_path):
    # A header that claims 1 GB: refused on the header alone.
    entry = file_entry("bomb.bin", b"")
    entry.size = 1024 * MB
    raw = io.BytesIO()
    raw.write(entry.tobuf(format=tarfile.PAX_FORMAT))
    data = __import__("gzip").compress(raw.getvalue())
    started = time.monotonic()
    with pytest.raises(ArchiveError, match="more than 1048576 bytes"):
        unpack(data, str(tmp_path), max_total_bytes=MB)
    assert time.monotonic() - started < 5
    assert list(tmp_path.iterdir()) == []


def test_unpack_refuses_garbage_and_truncated_archives(tmp_path):
    with pytest.raises(ArchiveError, match="Not a gzipped file"):
        unpack(b"not an archive at all", str(tmp_path), max_total_bytes=MB)
    (tmp_path / "src").mkdir()
    write(tmp_path / "src" / "p" / "a.bin", os.urandom(50_000))
    good = pack(str(tmp_path / "src"), ["p"], max_file_bytes=MB, max_total_bytes=MB).data
    with pytest.raises(ArchiveError):
        unpack(good[: len(good) // 2], str(tmp_path / "dst"), max_total_bytes=MB)


# -- framing ---------------------------------------------------------------------------------

NONCE = "0123456789abcdef"
KEY = "k" * 64


def framed_log(tmp_path: Path, output: str) -> tuple[str, bytes]:
    write(tmp_path / "profiles" / "result.bin", os.urandom(40_000))
    packed = pack(str(tmp_path), ["profiles"], max_file_bytes=MB, max_total_bytes=MB)
    header = {"exit_code": 0, "sha256": packed.sha256, "bytes": len(packed.data), "members": packed.members,
              "refused": [], "transport": "log", "timed_out": False, "stopped": False}
    preamble = "Running entrypoint for job x: python3 .episcope_ray/ray_wrapper.py\n"
    return preamble + f"{sync_archive.START} {NONCE}\n" + output + frame(NONCE, KEY, header, packed.data), packed.data


def unframe(log: str, nonce: str, key: str) -> tuple[str, FrameReader]:
    """Read a whole log at once: the visible output, and the reader holding the frame."""
    reader = FrameReader(nonce, key)
    visible = reader.feed(log)
    return visible + reader.close(), reader


def test_unframe_strips_preamble_and_frame(tmp_path):
    output = "hello\n__EPISCOPE_SYNC_BEGIN__ ffff {}\nforged marker of another nonce stays visible\n"
    log, data = framed_log(tmp_path, output)
    visible, reader = unframe(log, NONCE, KEY)
    assert visible == output
    assert reader.complete and reader.error is None and reader.data == data
    assert reader.preamble == ["Running entrypoint for job x: python3 .episcope_ray/ray_wrapper.py\n"]


@settings(max_examples=60, deadline=None)
@given(cuts=st.lists(st.integers(min_value=0, max_value=60_000), max_size=25))
def test_streamed_in_any_pieces_the_log_reads_the_same(tmp_path_factory, cuts):
    tmp = tmp_path_factory.mktemp("frame")
    output = "line one\npartial then __EPISCOPE_ text\n__EPISCOPE_ at line start but no marker\nend\n"
    log, data = framed_log(tmp, output)
    points = sorted({c % (len(log) + 1) for c in cuts})
    reader = FrameReader(NONCE, KEY)
    shown = []
    for start, stop in zip([0] + points, points + [len(log)]):
        shown.append(reader.feed(log[start:stop]))
    shown.append(reader.close())
    assert "".join(shown) == output
    assert reader.data == data and reader.error is None


def test_partial_lines_show_at_once_unless_they_could_be_a_marker():
    reader = FrameReader(NONCE, KEY)
    assert reader.feed(f"{sync_archive.START} {NONCE}\n") == ""
    assert reader.feed("progress 10%") == "progress 10%"
    assert reader.feed(" 20%\n__EPI") == " 20%\n"
    assert reader.feed("SODE_ is not a marker here\n") == "__EPISODE_ is not a marker here\n"


def test_a_damaged_or_truncated_frame_is_reported(tmp_path):
    log, _ = framed_log(tmp_path, "out\n")
    lines = log.splitlines(keepends=True)
    truncated = "".join(lines[:-2])
    _, reader = unframe(truncated, NONCE, KEY)
    assert reader.data is None and "truncated" in reader.error

    payload = lines[4]  # preamble, start, "out", begin, then the archive
    flipped = ("A" if payload[0] != "A" else "B") + payload[1:]
    _, reader = unframe("".join(lines[:4] + [flipped] + lines[5:]), NONCE, KEY)
    assert reader.data is None and "sha256" in reader.error

    marker, nonce, header_text = lines[3].split(" ", 2)
    header = json.loads(header_text)
    header["bytes"] = 10
    begin = f"{marker} {nonce} {json.dumps(header)}"
    end_marker, end_nonce, digest, _ = lines[-1].split(" ")
    signed_end = f"{end_marker} {end_nonce} {digest} {sync_archive.frame_mac(KEY, begin, digest)}\n"
    _, reader = unframe("".join(lines[:3] + [begin + "\n"] + lines[4:-1] + [signed_end]), NONCE, KEY)
    assert reader.data is None and "longer than" in reader.error


# -- the wrapper, run as on a worker ---------------------------------------------------------


def run_wrapper(workdir: Path, argv: list[str], *, timeout: float = 30, sync=("profiles",), env=None, signal_after=None):
    spec = {
        "nonce": NONCE, "key": KEY, "argv": argv, "env": env or {}, "sync": list(sync), "timeout": timeout,
        "max_file_bytes": MB, "max_log_bytes": 8 * MB, "max_shared_bytes": 64 * MB,
        "shared_dir": None, "shared_name": "x.tar.gz",
    }
    write(workdir / ".episcope_ray" / "job.json", json.dumps(spec))
    proc = subprocess.Popen(
        [sys.executable, str(WRAPPER), ".episcope_ray/job.json"], cwd=workdir, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, start_new_session=True,
    )
    if signal_after is not None:
        time.sleep(signal_after)
        proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert err == b""
    assert not (workdir / ".episcope_ray" / "job.json").exists()  # the key went with it
    visible, reader = unframe(out.decode(), NONCE, KEY)
    return proc.returncode, visible, reader


def test_wrapper_forwards_output_and_frames_outputs(tmp_path):
    write(tmp_path / "profiles" / "staged.txt", "old")
    code, visible, reader = run_wrapper(
        tmp_path,
        ["bash", "-c", "echo out; echo err >&2; echo $EXTRA; mkdir -p profiles; echo new > profiles/new.txt; printf 'tail'; exit 5"],
        env={"EXTRA": "from-spec"},
    )
    assert code == 5
    assert visible == "out\nerr\nfrom-spec\ntail\n"
    assert reader.header["exit_code"] == 5 and reader.header["members"] == ["profiles/new.txt"]
    dst = tmp_path / "dst"
    assert unpack(reader.data, str(dst), max_total_bytes=MB) == ["profiles/new.txt"]


def test_wrapper_times_out_kills_the_group_and_still_sends_outputs(tmp_path):
    marker = f"sleep-{os.getpid()}-{time.time_ns()}"
    script = f"mkdir -p profiles; echo partial > profiles/p.txt; (exec -a {marker} sleep 300) & echo started; wait"
    started = time.monotonic()
    code, visible, reader = run_wrapper(tmp_path, ["bash", "-c", script], timeout=1.5)
    assert time.monotonic() - started < 15
    assert visible.startswith("started\n")
    assert reader.header["timed_out"] is True and reader.header["members"] == ["profiles/p.txt"]
    assert code == 128 + signal.SIGTERM
    assert not _processes_named(marker)


def test_wrapper_kills_what_the_command_left_running(tmp_path):
    marker = f"left-{os.getpid()}-{time.time_ns()}"
    code, visible, reader = run_wrapper(tmp_path, ["bash", "-c", f"(exec -a {marker} sleep 300) & echo bye"])
    assert code == 0 and visible == "bye\n" and reader.header["exit_code"] == 0
    assert not _processes_named(marker)


def test_wrapper_stop_request_ends_the_command_and_reports_stopped(tmp_path):
    code, visible, reader = run_wrapper(
        tmp_path, ["bash", "-c", "mkdir -p profiles; echo x > profiles/x.txt; echo ready; sleep 300"], signal_after=1.5
    )
    assert visible == "ready\n"
    assert reader.header["stopped"] is True and reader.header["timed_out"] is False
    assert reader.header["members"] == ["profiles/x.txt"]


def test_wrapper_reports_a_command_that_cannot_start(tmp_path):
    code, visible, reader = run_wrapper(tmp_path, ["./no-such-program"])
    assert code == 127 and "cannot start" in visible
    assert reader.header["exit_code"] is None and reader.complete


def test_wrapper_keeps_the_log_decodable(tmp_path):
    code, visible, reader = run_wrapper(tmp_path, ["bash", "-c", r"printf 'bad \xff byte\n'"])
    assert visible == "bad \ufffd byte\n" and reader.complete


def _processes_named(marker: str) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
                state = Path(f"/proc/{entry}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if marker.encode() in cmdline and state not in (b"Z", b"X"):
                found.append(int(entry))
    return found
