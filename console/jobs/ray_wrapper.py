"""The entrypoint of a sandbox job on a Ray worker.

    python3 .episcope_ray/ray_wrapper.py .episcope_ray/job.json

Ray runs this in the job's working directory (the staged copy of the workspace). It runs
the command in its own process group, forwards the command's output (stdout and stderr
merged, as Ray keeps a single log per job), stops the command at its timeout or when Ray
asks the job to stop, kills whatever the command left behind (as a child subreaper it finds
processes that left the group too), and finally prints the
framed archive of the ``--sync`` outputs (see ``sync_archive``) and exits with the
command's status.

The output is re-encoded as UTF-8 (undecodable bytes replaced): Ray serves the log as
text, and one stray byte must not make the whole log, frame included, unreadable.

Standard library only and Python 3.8 compatible: the worker has Ray's Python, nothing of
episcope but this file and ``sync_archive.py`` (with the ``tar_check.py`` it imports) beside it.
"""

from __future__ import annotations

import codecs
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import time

import sync_archive  # shipped beside this file; the script's directory leads sys.path

KILL_GRACE_SECONDS = 3.0
PR_SET_CHILD_SUBREAPER = 36
DRAIN_SECONDS = 2.0
READ_CHUNK = 64 * 1024


class Output:
    """The job log, written whole chunks at a time, remembering whether a line is open."""

    def __init__(self) -> None:
        self._out = sys.stdout.buffer
        self.at_line_start = True

    def write(self, text: str) -> None:
        if not text:
            return
        self._out.write(text.encode("utf-8"))
        self._out.flush()
        self.at_line_start = text.endswith("\n")


def _become_subreaper() -> None:
    """Orphans of the command are re-parented to this wrapper, not to the worker's init, so a
    process that left the command's group (``setsid``, a double fork) is still found below it."""
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the command's group is all that can be ended


def _below_me() -> dict:
    """pid -> (parent pid, state) of every process below this wrapper."""
    table = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as fh:
                    stat = fh.read()
            except OSError:
                continue
            rest = stat[stat.rfind(b")") + 2 :].split()
            table[int(entry)] = (int(rest[1]), rest[0])
    below, todo = {}, [os.getpid()]
    while todo:
        parent = todo.pop()
        for pid, (ppid, state) in table.items():
            if ppid == parent and pid not in below:
                below[pid] = (ppid, state)
                todo.append(pid)
    return below


def _live_below(proc: subprocess.Popen) -> list:
    proc.poll()  # reap the leader, so that it does not count as alive
    below = _below_me()
    for pid, (ppid, state) in below.items():
        if state == b"Z" and ppid == os.getpid() and pid != proc.pid:
            try:
                os.waitpid(pid, os.WNOHANG)  # an orphan re-parented here
            except ChildProcessError:
                pass
    return [pid for pid, (_, state) in below.items() if state not in (b"Z", b"X")]


def _end_tree(pgid: int, proc: subprocess.Popen, grace: float) -> None:
    """SIGTERM the command's group and every process below this wrapper, wait ``grace``
    seconds, then SIGKILL what is left."""
    for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass
        for pid in _live_below(proc):
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while time.monotonic() < deadline:
            if not _live_below(proc):
                return
            time.sleep(0.05)


def run(spec: dict, out: Output) -> dict:
    """Run the command; return the frame header's status fields."""
    command = spec["argv"]
    env = dict(os.environ)
    env.update(spec.get("env") or {})
    stop = {"requested": False}

    def on_stop(signum, frame) -> None:
        stop["requested"] = True

    # Ray's stop_job sends SIGTERM (or SIGINT) to this process and its children, then
    # SIGKILL after a few seconds: use them to end the group and still send outputs back.
    signal.signal(signal.SIGTERM, on_stop)
    signal.signal(signal.SIGINT, on_stop)
    _become_subreaper()
    try:
        proc = subprocess.Popen(
            command,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
    except OSError as exc:
        out.write(f"[sandbox] cannot start {command[0]!r}: {exc.strerror or exc}\n")
        return {"exit_code": None, "timed_out": False, "stopped": False, "message": "cannot start the command"}
    pgid = proc.pid
    fd = proc.stdout.fileno()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    deadline = time.monotonic() + float(spec["timeout"])
    timed_out = False
    drain_until = None
    while True:
        if drain_until is None:
            if stop["requested"] or time.monotonic() >= deadline:
                timed_out = not stop["requested"]
                _end_tree(pgid, proc, KILL_GRACE_SECONDS)
            if proc.poll() is not None:
                # The command is done; whatever it left running in its group goes too, and
                # a process that escaped the group may hold the pipe: drain briefly only.
                _end_tree(pgid, proc, 0.5)
                drain_until = time.monotonic() + DRAIN_SECONDS
        elif time.monotonic() >= drain_until:
            break
        try:
            ready, _, _ = select.select([fd], [], [], 0.1)
        except InterruptedError:
            continue
        if not ready:
            continue
        chunk = os.read(fd, READ_CHUNK)
        if not chunk:
            break
        out.write(decoder.decode(chunk))
    out.write(decoder.decode(b"", final=True))
    proc.stdout.close()
    return {"exit_code": proc.wait(), "timed_out": timed_out, "stopped": stop["requested"], "message": None}


def send_outputs(spec: dict, status: dict, before: dict, out: Output) -> None:
    root = os.getcwd()
    shared_dir = spec.get("shared_dir")
    shared = bool(shared_dir) and os.path.isdir(shared_dir) and os.access(shared_dir, os.W_OK)
    limit = spec["max_shared_bytes"] if shared else spec["max_log_bytes"]
    packed = sync_archive.pack(
        root, spec["sync"], max_file_bytes=spec["max_file_bytes"], max_total_bytes=limit, before=before
    )
    header = dict(status)
    header.update(
        sha256=packed.sha256,
        bytes=len(packed.data),
        members=packed.members,
        refused=packed.refused,
        transport="shared" if shared else "log",
    )
    if shared:
        target = os.path.join(shared_dir, spec["shared_name"])
        tmp = target + ".part"
        with open(tmp, "wb") as fh:
            fh.write(packed.data)
        os.replace(tmp, target)
    if not out.at_line_start:
        out.write("\n")
    out.write(sync_archive.frame(spec["nonce"], spec["key"], header, None if shared else packed.data))


def exit_status(code) -> int:
    if code is None:
        return 127
    return 128 - code if code < 0 else code


def main(argv: list) -> int:
    with open(argv[1], "rb") as fh:
        spec = json.loads(fh.read())
    # The spec holds the key that signs the frame: gone before the command could read it.
    os.unlink(argv[1])
    out = Output()
    out.write(f"{sync_archive.START} {spec['nonce']}\n")
    root = os.getcwd()
    before = sync_archive.snapshot(root, spec["sync"])
    status = run(spec, out)
    send_outputs(spec, status, before, out)
    return exit_status(status["exit_code"])


if __name__ == "__main__":
    sys.exit(main(sys.argv))
