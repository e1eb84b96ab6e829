"""The process that holds a sandbox job's command, so that nothing the command starts outlives it.

    python3 -I -S supervisor.py --job-dir DIR --job-id ID [--stage DIR] --grace S
                             --control-fd R --report-fd W [--containment auto|pidns|cgroup|subreaper]
                             [--read-only PATH]... -- COMMAND [ARG...]

A command may leave its process group (``setsid``, ``setpgid``) or orphan itself (a double
fork); killing the group then misses it. The supervisor keeps the whole tree by the first of
these the machine allows:

``pidns``
    a PID namespace (root only). The supervisor's child is the namespace's init; when it
    ends, the kernel kills every process left in the namespace. The init also gets a mount
    namespace of its own: a private ``/proc`` (the job sees no process outside its own, so no
    other process's environment) and the ``--read-only`` paths (the workspace) bound read-only.
``cgroup``
    a child of the supervisor's cgroup v2 group; the command and all it starts stay in it
    and ``cgroup.kill`` ends them at once.
``subreaper``
    ``PR_SET_CHILD_SUBREAPER``: orphaned descendants are re-parented to the supervisor,
    which finds them by parent links in ``/proc`` and kills them until none is left.

As root, the command held by ``cgroup`` or ``subreaper`` (a profile job, which must see host
pids, or where PID namespaces are refused) still gets a mount namespace of its own, made
between fork and exec: the ``--read-only`` paths are bound read-only there, while the host's
``/proc`` and pids stay (the supervisor itself keeps the host's view: it writes the job
record). Where the kernel refuses the namespace, the job runs without it and a note says so.

The command is stopped by SIGTERM to the supervisor (SIGTERM to every process of the tree,
``--grace`` seconds, then SIGKILL), and also when the process that started the supervisor
dies: that process holds the write end of the ``--control-fd`` pipe, so end of file there
means it is gone; the supervisor then ends the tree and marks the job record ``lost``. When
the command exits by itself, whatever it left running is ended the same way. The supervisor
exits only once the tree is empty, and it inherits the job's slot lock, so a slot is never
free while any process of the job runs.

The ``--report-fd`` pipe gets JSON lines: ``{"containment": ...}`` once the command runs (with
``"notes"`` on a fallback), then ``{"returncode": ...}`` (negative: killed by that signal).

Standard library only; it runs by path, on whichever Python runs the sandbox.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime

MODES = ("pidns", "cgroup", "subreaper")
CLONE_NEWNS = 0x00020000
CLONE_NEWPID = 0x20000000
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 32, 4096, 16384, 1 << 18
PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
POLL_SECONDS = 0.05
LEFTOVER_GRACE_SECONDS = 1.0  # for what a command that exited by itself left running
KILL_ROUNDS_SECONDS = 10.0

_libc = ctypes.CDLL(None, use_errno=True)


class Unavailable(Exception):
    """This way of holding the tree does not work here; the message says why."""


def _check(result: int, what: str) -> None:
    if result != 0:
        code = ctypes.get_errno()
        raise Unavailable(f"{what}: {os.strerror(code)}")


class Stop:
    """Why the tree must end early: a SIGTERM, or the starter's death (end of its pipe)."""

    def __init__(self, control_fd: int) -> None:
        self.control_fd = control_fd
        self.signalled = False
        self.starter_gone = False

    def on_signal(self, signum, frame) -> None:
        self.signalled = True

    def watched(self) -> list:
        """The descriptors to wake up for: the starter's pipe until it ended."""
        return [] if self.starter_gone else [self.control_fd]

    def requested(self) -> bool:
        if not self.starter_gone:
            ready, _, _ = select.select([self.control_fd], [], [], 0)
            if ready and os.read(self.control_fd, 64) == b"":
                self.starter_gone = True
        return self.signalled or self.starter_gone


def _wait_readable(*fds: int) -> None:
    """Sleep until one of ``fds`` is readable or ``POLL_SECONDS`` pass."""
    select.select(fds, [], [], POLL_SECONDS)


def _report(fd: int, **fields) -> None:
    try:
        os.write(fd, (json.dumps(fields, sort_keys=True) + "\n").encode())
    except OSError:
        pass  # the starter is gone; the tree still ends


def _spawn(argv: list, preexec=None) -> subprocess.Popen:
    # The command's own session: a terminal signal for the supervisor does not reach it.
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=preexec)


_reaped: dict = {}  # pid -> wait status of every child reaped so far


def _reap_all() -> None:
    """Reap every exited child, keeping its wait status in ``_reaped``."""
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        _reaped[pid] = status


def _returncode(status: int) -> int:
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _proc_table() -> dict:
    """pid -> (parent pid, state) of every process in this /proc."""
    table = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:
            continue
        rest = stat[stat.rfind(b")") + 2 :].split()
        table[int(entry)] = (int(rest[1]), rest[0])
    return table


def _descendants(root: int) -> list:
    """Processes below ``root`` by parent links, zombies included."""
    table = _proc_table()
    children: dict = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child)
    return found


def _live(pids: list) -> list:
    table = _proc_table()
    return [p for p in pids if p in table and table[p][1] not in (b"Z", b"X")]


class Tree:
    """One way of finding and killing all of the command's processes."""

    name = ""

    def start(self, argv: list, prepare=None) -> subprocess.Popen:
        """Spawn the command; ``prepare`` runs in the child just before exec."""
        return _spawn(argv, prepare)

    def members(self) -> list:
        raise NotImplementedError

    def signal_all(self, sig: int) -> None:
        for pid in self.members():
            try:
                os.kill(pid, sig)
            except ProcessLookupError:
                pass

    def empty(self) -> bool:
        _reap_all()
        return not _live(self.members())

    def end(self, grace: float) -> None:
        """SIGTERM everything, wait ``grace`` seconds, then SIGKILL until nothing is left."""
        if self.empty():
            self.close()
            return
        self.signal_all(signal.SIGTERM)
        deadline = time.monotonic() + grace
        while time.monotonic() < deadline and not self.empty():
            time.sleep(POLL_SECONDS)
        deadline = time.monotonic() + KILL_ROUNDS_SECONDS
        # A process may fork between two rounds; each round kills what the last one missed.
        while not self.empty() and time.monotonic() < deadline:
            self.signal_all(signal.SIGKILL)
            time.sleep(POLL_SECONDS)
        _reap_all()
        self.close()

    def close(self) -> None:
        pass


class SubreaperTree(Tree):
    name = "subreaper"

    def __init__(self) -> None:
        _check(_libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0), "prctl(PR_SET_CHILD_SUBREAPER)")
        self.root = os.getpid()

    def members(self) -> list:
        return _descendants(self.root)


class CgroupTree(SubreaperTree):
    """A cgroup v2 child group; the subreaper reaps the zombies it leaves."""

    name = "cgroup"

    def __init__(self, job_id: str) -> None:
        mount = _cgroup2_mount()
        own = _own_cgroup()
        if mount is None or own is None:
            raise Unavailable("no cgroup v2 hierarchy mounted")
        parent = mount + own.rstrip("/")
        if not os.access(parent, os.W_OK):
            raise Unavailable(f"cgroup {own} is not writable")
        self.path = tempfile.mkdtemp(prefix=f"episcope-{job_id}-", dir=parent)
        super().__init__()

    def start(self, argv: list, prepare=None) -> subprocess.Popen:
        procs = os.path.join(self.path, "cgroup.procs")

        def enter() -> None:
            with open(procs, "w") as fh:
                fh.write("0\n")  # the process writing: the command, before it runs
            if prepare is not None:
                prepare()

        try:
            return _spawn(argv, enter)
        except subprocess.SubprocessError as exc:
            self.close()
            raise Unavailable(f"cannot enter the cgroup: {exc}") from None

    def members(self) -> list:
        try:
            with open(os.path.join(self.path, "cgroup.procs")) as fh:
                return [int(line) for line in fh if line.strip()]
        except OSError:
            return []

    def signal_all(self, sig: int) -> None:
        if sig == signal.SIGKILL:
            try:
                with open(os.path.join(self.path, "cgroup.kill"), "w") as fh:
                    fh.write("1\n")
                return
            except OSError:
                pass  # kernels before 5.14: one process at a time
        super().signal_all(sig)

    def close(self) -> None:
        try:
            os.rmdir(self.path)
        except OSError:
            pass


def _cgroup2_mount():
    try:
        with open("/proc/self/mountinfo") as fh:
            for line in fh:
                left, _, right = line.partition(" - ")
                if right.split()[:1] == ["cgroup2"]:
                    return left.split()[4]
    except OSError:
        pass
    return None


def _own_cgroup():
    try:
        with open("/proc/self/cgroup") as fh:
            for line in fh:
                if line.startswith("0::"):
                    return line[3:].strip()
    except OSError:
        pass
    return None


def _mount(source, target, fstype, flags: int, what: str) -> None:
    encode = lambda v: None if v is None else os.fsencode(v)  # noqa: E731
    _check(_libc.mount(encode(source), encode(target), encode(fstype), flags, None), what)


def _isolate_mounts(read_only: list, private_proc: bool = True) -> list:
    """A mount namespace for the calling process: the ``read_only`` paths bound read-only and,
    in a PID namespace's init, a private /proc. Returns notes on what failed."""
    notes = []
    try:
        _check(_libc.unshare(CLONE_NEWNS), "unshare(CLONE_NEWNS)")
        _mount(None, "/", None, MS_REC | MS_PRIVATE, "making mounts private")
    except Unavailable as exc:
        unchanged = "/proc and the workspace stay as they are" if private_proc else "the workspace stays writable"
        return [f"no mount namespace ({exc}): {unchanged}"]
    if private_proc:
        try:
            _mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mounting /proc")
        except Unavailable as exc:
            notes.append(str(exc))
    for path in read_only:
        try:
            _mount(path, path, None, MS_BIND | MS_REC, f"binding {path}")
            _mount(None, path, None, MS_BIND | MS_REMOUNT | MS_RDONLY, f"making {path} read-only")
        except Unavailable as exc:
            notes.append(str(exc))
    return notes


class CommandMounts:
    """The command's own mount namespace, made in the child between fork and exec (the
    ``preexec`` of its spawn). The child's notes come back through a pipe that exec closes."""

    def __init__(self, read_only: list) -> None:
        self.read_only = read_only
        self.notes_r, self.notes_w = os.pipe()  # close-on-exec, as Python makes every pipe

    def __call__(self) -> None:
        notes = _isolate_mounts(self.read_only, private_proc=False)
        os.write(self.notes_w, json.dumps(notes).encode())

    def notes(self) -> list:
        """In the supervisor once the spawn returned (the child has exec'd or failed)."""
        os.close(self.notes_w)
        with os.fdopen(self.notes_r, "rb") as fh:
            data = fh.read()
        return json.loads(data) if data else []


class NamespaceInit(Tree):
    """Inside the PID namespace, as its init: every process here is below it."""

    name = "pidns"

    def empty(self) -> bool:
        # Every process of the namespace is a child of its init once orphaned: none left to
        # wait for means none left at all (this holds even where /proc is the host's).
        _reap_all()
        try:
            os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)  # looks, reaps nothing
        except ChildProcessError:
            return True
        return False

    def signal_all(self, sig: int) -> None:
        try:
            os.kill(-1, sig)  # in a PID namespace's init: every other process of the namespace
        except ProcessLookupError:
            pass


def _supervise(tree: Tree, argv: list, stop: Stop, grace: float, report_fd: int, notes: list,
               mounts: CommandMounts | None = None) -> int:
    """Run the command in ``tree`` (in a mount namespace of its own with ``mounts``); return
    its status once the tree is empty."""
    try:
        command = tree.start(argv, mounts)
    except OSError as exc:
        tree.close()
        _report(report_fd, containment=tree.name, notes=notes, error=f"cannot start {argv[0]!r}: {exc.strerror or exc}")
        return 127
    finally:
        if mounts is not None:
            notes = notes + mounts.notes()  # the child has exec'd or failed: its notes are all written
    _report(report_fd, containment=tree.name, notes=notes)
    try:
        exited = [os.pidfd_open(command.pid)]  # readable once the command has exited
    except (AttributeError, OSError):
        exited = []  # before Linux 5.3: the poll interval it is
    status = None
    while status is None:
        _reap_all()
        status = _reaped.get(command.pid)
        if status is None and stop.requested():
            break
        if status is None:
            _wait_readable(*exited, *stop.watched())
    for fd in exited:
        os.close(fd)
    tree.end(LEFTOVER_GRACE_SECONDS if status is not None else grace)
    status = _reaped.get(command.pid)
    returncode = _returncode(status) if status is not None else -signal.SIGKILL
    _report(report_fd, returncode=returncode)
    return returncode


def _run_namespace(args, stop: Stop, read_only: list) -> int:
    """Fork the init of a new PID namespace and wait for it (from outside the namespace)."""
    _check(_libc.unshare(CLONE_NEWPID), "unshare(CLONE_NEWPID)")
    alive_r, alive_w = os.pipe()  # the init watches the supervisor through it
    done_r, done_w = os.pipe()  # and the supervisor the init: end of file once it exited
    child = os.fork()
    if child == 0:
        status = 1
        try:
            os.close(alive_w)
            os.close(done_r)
            # The supervisor gone, the init goes too, and with it the whole namespace.
            _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
            ready, _, _ = select.select([alive_r], [], [], 0)
            if ready:
                os._exit(1)  # the supervisor died before the death signal was armed
            os.close(args.control_fd)
            inner = Stop(alive_r)
            signal.signal(signal.SIGTERM, inner.on_signal)  # an init only gets handled signals
            notes = _isolate_mounts(read_only)
            returncode = _supervise(NamespaceInit(), args.command, inner, args.grace, args.report_fd, notes)
            status = returncode if returncode >= 0 else 128 - returncode
        finally:
            os._exit(status & 0xFF)
    os.close(alive_r)
    os.close(done_w)
    asked = None
    while True:
        try:
            pid, status = os.waitpid(child, os.WNOHANG)
        except ChildProcessError:
            return 1
        if pid == child:
            return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        if asked is None and stop.requested():
            asked = time.monotonic()
            os.kill(child, signal.SIGTERM)
        if asked is not None and time.monotonic() - asked > args.grace + KILL_ROUNDS_SECONDS:
            os.kill(child, signal.SIGKILL)  # the kernel ends the namespace with its init
        _wait_readable(done_r, *stop.watched())


def remove_tree(top: str) -> None:
    """Remove a directory tree of any depth and path length, never following a link.

    ``shutil.rmtree`` recurses once per level and names each file by its whole path, so a
    job's 1,000-deep tree would crash it; this walks with directory descriptors instead.
    """
    flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
    try:
        fd = os.open(top, flags)
    except FileNotFoundError:
        return
    except NotADirectoryError:
        os.unlink(top)
        return
    stack = [("", _clear_files(fd))]  # (name in its parent, subdirectories still to remove)
    while True:
        name, subdirs = stack[-1]
        if subdirs:
            below = subdirs.pop()
            child = os.open(below, flags, dir_fd=fd)
            os.close(fd)
            fd = child
            stack.append((below, _clear_files(fd)))
            continue
        stack.pop()
        if not stack:
            break
        parent = os.open("..", flags, dir_fd=fd)
        os.close(fd)
        fd = parent
        os.rmdir(name, dir_fd=fd)
    os.close(fd)
    os.rmdir(top)


def _clear_files(fd: int) -> list:
    """Unlink the files of the directory ``fd``; return the names of its subdirectories."""
    subdirs = []
    with os.scandir(fd) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                subdirs.append(entry.name)
            else:
                os.unlink(entry.name, dir_fd=fd)
    return subdirs


def mark_lost(job_dir: str) -> None:
    """Rewrite a job record that is not final as ``lost``: the process that ran it died."""
    path = os.path.join(job_dir, "job.json")
    try:
        with open(path, "rb") as fh:
            record = json.loads(fh.read())
    except (OSError, ValueError):
        return
    if not isinstance(record, dict) or record.get("state") not in ("queued", "running"):
        return
    record.update(
        state="lost",
        finished_at=datetime.now(UTC).isoformat(),
        message="the sandbox process running the job died; its processes were ended",
    )
    fd, tmp = tempfile.mkstemp(prefix=".job.json.", dir=job_dir)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(record, fh)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass


def parse_args(argv: list):
    parser = argparse.ArgumentParser(prog="supervisor.py")
    parser.add_argument("--job-dir", required=True)
    parser.add_argument("--job-id", required=True)
    parser.add_argument("--stage", default=None, help="the staged copy, removed when the starter died")
    parser.add_argument("--grace", type=float, default=3.0)
    parser.add_argument("--control-fd", type=int, required=True)
    parser.add_argument("--report-fd", type=int, required=True)
    parser.add_argument("--containment", choices=("auto",) + MODES, default="auto")
    parser.add_argument("--read-only", action="append", default=[])
    parser.add_argument("--host-pids", action="store_true",
                        help="the command must see the host's process ids: no PID namespace")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if not args.command:
        parser.error("no command")
    return args


def main(argv: list) -> int:
    args = parse_args(argv)
    stop = Stop(args.control_fd)
    signal.signal(signal.SIGTERM, stop.on_signal)
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the starter decides; a terminal ^C reaches it
    modes = MODES if args.containment == "auto" else (args.containment,)
    notes = []
    if args.host_pids and "pidns" in modes:
        # Nsight Compute instances take turns on the GPU's counters through a lock that names
        # its holder by pid; from inside separate PID namespaces those pids mean other
        # processes, and the second profiler of a wave waits until its timeout (seen on the
        # H200 with four surveys at once). Such jobs keep the host's pids.
        modes = tuple(mode for mode in modes if mode != "pidns")
        notes.append("pidns: not for a profiler (Nsight Compute coordinates concurrent instances by host pid)")
    returncode = None
    for mode in modes:
        try:
            if mode == "pidns":
                if os.geteuid() != 0:
                    raise Unavailable("PID namespaces need root")
                returncode = _run_namespace(args, stop, args.read_only)
            else:
                tree = CgroupTree(args.job_id) if mode == "cgroup" else SubreaperTree()
                # Without a PID namespace the read-only paths need a mount namespace of their own.
                mounts = CommandMounts(args.read_only) if os.geteuid() == 0 and args.read_only else None
                returncode = _supervise(tree, args.command, stop, args.grace, args.report_fd, notes, mounts)
                returncode = returncode if returncode >= 0 else 128 - returncode
            break
        except Unavailable as exc:
            notes.append(f"{mode}: {exc}")
    if returncode is None:
        _report(args.report_fd, containment=None, notes=notes, error="no way to hold the job's processes")
        return 127
    if stop.starter_gone:
        mark_lost(args.job_dir)
        if args.stage:
            try:
                remove_tree(args.stage)
            except OSError:
                pass  # a temporary directory: the system clears it in time
    return returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
