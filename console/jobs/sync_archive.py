"""Output files of a remote job, carried back inside its log.

A Ray worker shares no disk with the sandbox that submitted the job; the one channel back is
the job's log. The job's wrapper packs the new or changed files under the ``--sync`` paths
into a gzip'd tar and prints it, base64 encoded, between two marker lines; the client strips
that frame from the visible output, checks its digest and unpacks it into the staged copy::

    __EPISCOPE_START__ <nonce>                  (the command's output follows)
    ... the command's output ...
    __EPISCOPE_SYNC_BEGIN__ <nonce> <header JSON>
    <base64 of the archive, in lines of 16384 characters>
    __EPISCOPE_SYNC_END__ <nonce> <sha256 of the archive> <HMAC-SHA256 of the begin line and the digest>

The header holds the command's exit status, whether the wrapper stopped it (timeout or a
stop request), the archive's size and digest, its members, the files it refused and how the
archive travels: ``"log"`` (the lines above) or ``"shared"`` (a file of that digest in a
directory both sides mount, for outputs too large for a log). The nonce is random per job,
so a command that prints marker-like lines cannot make a frame by accident; the HMAC is keyed
by a second random value that the wrapper reads and deletes before the command starts, so a
command cannot make one on purpose either (its own verdict, its own outputs): a frame whose
HMAC does not match is ignored. Marker lines are at most ``MAX_LINE`` characters; a longer
line is output (or, inside a frame, damage), never buffered whole.

Neither side trusts an archive: links, absolute paths, ``..``, special files, names that are
not in normal form and archives over the size limit are refused before anything is written.
Before ``tarfile`` parses a byte of it, the archive is walked whole by ``tar_check`` (bounded
pax and long-name headers, member count and bytes, the gzip stream verified to its end), as
episode archives are: a crafted pax header would otherwise keep ``tarfile`` busy for minutes.

Standard library only, and Python 3.8 compatible: this file travels to the worker beside the
wrapper, and ``tar_check.py`` beside it (there both are top-level modules; it is imported
only by :func:`unpack`, which the wrapper itself never calls).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import io
import json
import os
import shutil
import stat
import tarfile
import tempfile
from pathlib import PurePosixPath
from typing import Dict, List, Optional, Tuple

START = "__EPISCOPE_START__"
BEGIN = "__EPISCOPE_SYNC_BEGIN__"
END = "__EPISCOPE_SYNC_END__"
_MARK = "__EPISCOPE_"
B64_LINE = 16384  # a multiple of 4, so every line decodes on its own
MAX_LINE = 16 * 1024 * 1024  # characters of a marker line (a header lists every member)
MAX_PREAMBLE = 1024 * 1024  # characters of Ray's own lines kept
MAX_ARCHIVE_BYTES = 1 << 40  # what a header may claim at all
_READ = 1024 * 1024

Refusal = Dict[str, str]  # {"path", "reason"}, as the local sandbox reports them


class ArchiveError(ValueError):
    """An archive or frame that is refused; the message is one line."""


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def check_name(name: str) -> str:
    """Return ``name`` if it is a plain relative path in normal form, else raise."""
    if not name or "\0" in name or "\\" in name:
        raise ArchiveError(f"member name {name!r} is empty or holds a NUL or backslash")
    if name.startswith("/"):
        raise ArchiveError(f"member {name!r} has an absolute path")
    parts = name.split("/")
    if ".." in parts:
        raise ArchiveError(f"member {name!r} climbs out with '..'")
    if "" in parts or "." in parts:
        raise ArchiveError(f"member {name!r} is not in normal form")
    return name


def file_digest(path: str) -> str:
    # Read in blocks rather than through hashlib.file_digest (3.11): workers run Python 3.8.
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(_READ), b""):
            digest.update(block)
    return digest.hexdigest()


def _walk_files(root: str, rel: str, refused: List[Refusal]) -> List[str]:
    """Regular files under ``root/rel``; links and special files go to ``refused``."""
    path = root
    for part in rel.split("/"):
        path = os.path.join(path, part)
        if os.path.islink(path):
            refused.append({"path": os.path.relpath(path, root), "reason": "symbolic link"})
            return []
    if not os.path.lexists(path):
        return []
    if os.path.isfile(path):
        return [rel]
    if not os.path.isdir(path):
        refused.append({"path": rel, "reason": "not a regular file"})
        return []
    found = []
    for dirpath, dirnames, filenames in os.walk(path):
        for name in sorted(dirnames):
            if os.path.islink(os.path.join(dirpath, name)):
                refused.append({"path": os.path.relpath(os.path.join(dirpath, name), root), "reason": "symbolic link"})
        dirnames[:] = sorted(n for n in dirnames if not os.path.islink(os.path.join(dirpath, n)))
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            member = os.path.relpath(full, root).replace(os.sep, "/")
            mode = os.lstat(full).st_mode
            if stat.S_ISLNK(mode):
                refused.append({"path": member, "reason": "symbolic link"})
            elif not stat.S_ISREG(mode):
                refused.append({"path": member, "reason": "not a regular file"})
            else:
                found.append(member)
    return found


def snapshot(root: str, paths: List[str]) -> Dict[str, Tuple[int, str]]:
    """Size and digest of every regular file under the sync paths, before the command runs."""
    seen: Dict[str, Tuple[int, str]] = {}
    for rel in paths:
        for member in _walk_files(root, rel, []):
            full = os.path.join(root, member)
            seen[member] = (os.lstat(full).st_size, file_digest(full))
    return seen


class Packed:
    def __init__(self, data: bytes, members: List[str], refused: List[Refusal]) -> None:
        self.data = data
        self.members = members
        self.refused = refused

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.data).hexdigest()


def pack(
    root: str,
    paths: List[str],
    *,
    max_file_bytes: int,
    max_total_bytes: int,
    before: Optional[Dict[str, Tuple[int, str]]] = None,
) -> Packed:
    """Pack the files under ``paths`` (relative to ``root``) that are new or changed since
    ``before`` (see :func:`snapshot`). Files over ``max_file_bytes``, or that would take
    the archive's contents past ``max_total_bytes``, are refused and listed, not packed."""
    refused: List[Refusal] = []
    chosen: List[str] = []
    total = 0
    for rel in dict.fromkeys(paths):
        try:
            check_name(rel)
        except ArchiveError as exc:
            refused.append({"path": rel, "reason": str(exc)})
            continue
        for member in _walk_files(root, rel, refused):
            if member in chosen:
                continue  # overlapping sync paths
            full = os.path.join(root, member)
            size = os.lstat(full).st_size
            old = (before or {}).get(member)
            if old is not None and old[0] == size and old[1] == file_digest(full):
                continue  # staged in and left as it was
            if size > max_file_bytes:
                refused.append({"path": member, "reason": f"{_mb(size)}, over --max-output-file-mb ({_mb(max_file_bytes)})"})
            elif total + size > max_total_bytes:
                refused.append({"path": member, "reason": f"the archive would pass {_mb(max_total_bytes)}"})
            else:
                chosen.append(member)
                total += size
    buffer = io.BytesIO()
    # mtime=0 in the gzip header: the same files give the same bytes.
    with tarfile.open(fileobj=buffer, mode="w:gz", format=tarfile.PAX_FORMAT, compresslevel=6) as tar:
        for member in chosen:
            full = os.path.join(root, member)
            info = os.lstat(full)
            entry = tarfile.TarInfo(member)
            entry.size = info.st_size
            entry.mtime = int(info.st_mtime)
            entry.mode = 0o755 if info.st_mode & 0o111 else 0o644
            with open(full, "rb") as fh:
                tar.addfile(entry, fh)
    return Packed(buffer.getvalue(), chosen, refused)


def _check_destination(dest: str, member: str) -> str:
    """The path ``member`` is written to under ``dest``, refusing one reached through a link."""
    path = dest
    parts = member.split("/")
    for index, part in enumerate(parts):
        path = os.path.join(path, part)
        if os.path.islink(path):
            raise ArchiveError(f"member {member!r} would be written through the link {os.path.relpath(path, dest)}")
        last = index == len(parts) - 1
        if os.path.lexists(path) and not last and not os.path.isdir(path):
            raise ArchiveError(f"member {member!r} needs {os.path.relpath(path, dest)} to be a directory")
        if last and os.path.isdir(path):
            raise ArchiveError(f"member {member!r} would replace a directory")
    return path


def _check_whole(data: bytes, *, max_total_bytes: int, max_members: int) -> None:
    """Walk the whole archive with ``tar_check`` before ``tarfile`` parses any of it."""
    if __package__:
        from ..formats import tar_check
    else:  # a top-level module on a Ray worker, tar_check.py shipped beside it
        import tar_check
    # The decompressed stream holds, beyond the contents, a header block, at most one pax
    # header with its data block and the padding of each member: four blocks a member.
    limits = tar_check.TarLimits(members=max_members, total_bytes=max_total_bytes,
                                 stream_bytes=max_total_bytes + 4 * tar_check.BLOCK * (max_members + 1))
    try:
        tar_check.check_tar_gz(io.BytesIO(data), limits)
    except tar_check.TarRefused as exc:
        raise ArchiveError(f"archive refused: {exc}") from None


def unpack(data: bytes, dest: str, *, max_total_bytes: int, max_members: int = 100_000) -> List[str]:
    """Write the archive's files under ``dest`` and return their relative paths.

    Every member is checked before the first file is written, so a refused archive leaves
    ``dest`` untouched. Only regular files and directories are accepted; each file is
    written whole (temporary file, then rename) with mode 0644 or 0755.
    """
    _check_whole(data, max_total_bytes=max_total_bytes, max_members=max_members)
    files: List[tarfile.TarInfo] = []
    names = set()
    total = 0
    try:
        tar = tarfile.open(fileobj=io.BytesIO(data), mode="r:gz")
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ArchiveError(f"not a gzip'd tar archive: {exc}") from None
    with tar:
        try:
            # Member headers are read one at a time, so a forged size is caught before
            # the data it claims is ever decompressed.
            for entry in tar:
                check_name(entry.name)
                if entry.isdir():
                    continue
                if not entry.isreg():
                    kind = "link" if entry.issym() or entry.islnk() else "special file"
                    raise ArchiveError(f"member {entry.name!r} is a {kind}")
                if entry.name in names:
                    raise ArchiveError(f"member {entry.name!r} appears twice")
                total += entry.size
                if total > max_total_bytes:
                    raise ArchiveError(f"archive contents pass {_mb(max_total_bytes)}")
                if len(names) >= max_members:
                    raise ArchiveError(f"archive holds more than {max_members} files")
                names.add(entry.name)
                files.append(entry)
        except (tarfile.TarError, OSError, EOFError) as exc:
            raise ArchiveError(f"archive is damaged: {exc}") from None
        for entry in files:
            for parent in PurePosixPath(entry.name).parents:
                if str(parent) in names:
                    raise ArchiveError(f"member {entry.name!r} lies under the file {str(parent)!r}")
        targets = [(entry, _check_destination(dest, entry.name)) for entry in files]
        written = []
        for entry, target in targets:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            source = tar.extractfile(entry)
            fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".unpack", dir=os.path.dirname(target))
            try:
                with os.fdopen(fd, "wb") as out:
                    shutil.copyfileobj(source, out, _READ)
                os.chmod(tmp, 0o755 if entry.mode & 0o111 else 0o644)
                os.replace(tmp, target)
            except BaseException:
                try:
                    os.unlink(tmp)
                except FileNotFoundError:
                    pass
                raise
            written.append(entry.name)
    return written


def frame_mac(key: str, begin_line: str, digest: str) -> str:
    """The HMAC that proves a frame was written by the wrapper (which alone knew ``key``)."""
    return hmac.new(key.encode(), f"{begin_line}\n{digest}".encode(), hashlib.sha256).hexdigest()


def frame(nonce: str, key: str, header: dict, data: Optional[bytes]) -> str:
    """The frame lines for ``header``; ``data`` is base64'd into it unless ``None`` (an
    archive that travels through a shared directory)."""
    digest = header["sha256"]
    begin = f"{BEGIN} {nonce} {json.dumps(header, sort_keys=True, separators=(',', ':'))}"
    lines = [begin + "\n"]
    if data is not None:
        encoded = base64.b64encode(data).decode("ascii")
        lines.extend(encoded[i : i + B64_LINE] + "\n" for i in range(0, len(encoded), B64_LINE))
    lines.append(f"{END} {nonce} {digest} {frame_mac(key, begin, digest)}\n")
    return "".join(lines)


def _read_header(text: str) -> dict:
    """The frame header, checked; ``ValueError`` says what is wrong with it."""
    try:
        header = json.loads(text)
    except RecursionError:
        raise ValueError("nested too deeply") from None
    if not isinstance(header, dict) or not isinstance(header.get("sha256"), str):
        raise ValueError("no sha256")
    size = header.get("bytes", 0)
    if not isinstance(size, int) or isinstance(size, bool) or not 0 <= size <= MAX_ARCHIVE_BYTES:
        raise ValueError(f"bytes is not a size: {str(size)[:40]}")
    return header


class FrameReader:
    """Separates a job log, fed in pieces as it streams, into the command's visible output
    and the frame.

    ``feed`` returns the text to show now. Text before the start line is Ray's own (runtime
    environment set-up, the entrypoint it runs) and is kept in ``preamble``; a log without
    a start line means the wrapper never ran, and the preamble says why. A partial line is
    shown at once unless it could be the beginning of a marker line. Only a frame whose end
    line carries the right HMAC counts; ``forged`` counts the others.
    """

    def __init__(self, nonce: str, key: str) -> None:
        self._key = key
        self._start = f"{START} {nonce}"
        self._begin = f"{BEGIN} {nonce} "
        self._end = f"{END} {nonce} "
        self._pending: List[str] = []  # pieces of a line not yet ended, joined once it ends
        self._pending_size = 0
        self._dropping = False  # inside an overlong line that is not shown
        self._mid_line = False  # part of the current line was already shown
        self._in_frame = False
        self._begin_line = ""
        self._candidate: Optional[dict] = None
        self._b64: List[str] = []
        self._b64_chars = 0
        self._b64_limit = 0
        self._preamble_size = 0
        self.started = False
        self.preamble: List[str] = []
        self.header: Optional[dict] = None  # of the authentic frame, once it is complete
        self.data: Optional[bytes] = None  # the archive of a "log" frame, digest checked
        self.complete = False  # an authentic end line matched the begin line
        self.forged = 0  # frames that carried this job's nonce but not the wrapper's HMAC
        self.error: Optional[str] = None

    def feed(self, text: str) -> str:
        shown = []
        pos = 0
        while True:
            newline = text.find("\n", pos)
            if newline < 0:
                break
            piece = text[pos : newline + 1]
            pos = newline + 1
            if self._dropping:
                self._dropping = False
                continue
            if self._pending:
                piece = "".join(self._pending) + piece
                self._pending, self._pending_size = [], 0
            shown.append(self._line(piece))
        rest = text[pos:]
        if rest and not self._dropping:
            if not self._pending and self.started and not self._in_frame and not self._could_be_marker(rest):
                shown.append(rest)
                self._mid_line = True
            else:
                self._pending.append(rest)
                self._pending_size += len(rest)
                if self._pending_size > MAX_LINE:
                    shown.append(self._overlong())
        return "".join(shown)

    def _overlong(self) -> str:
        """A line past ``MAX_LINE`` that is not ended: no marker. Show it, or drop it."""
        text = "".join(self._pending)
        self._pending, self._pending_size = [], 0
        if self.started and not self._in_frame:
            self._mid_line = True  # the rest of the line is shown as it comes
            return text
        if self._in_frame:
            self._abandon_frame("the output archive has a line longer than any it writes")
        self._dropping = True
        return ""

    def close(self) -> str:
        """End of the log: return what is left to show and settle ``error``."""
        rest = "".join(self._pending)
        self._pending, self._pending_size = [], 0
        shown = self._line(rest) if rest and not self._dropping else ""
        if self._in_frame:
            self._abandon_frame("the output archive is truncated (no end line)")
        if not self.complete and self.forged and self.error is None:
            self.error = f"{self.forged} output frame(s) without the wrapper's signature were ignored"
        return shown

    def _could_be_marker(self, partial: str) -> bool:
        return not self._mid_line and (_MARK.startswith(partial) or partial.startswith(_MARK))

    def _abandon_frame(self, error: str) -> None:
        self._in_frame = False
        self._candidate = None
        self._b64, self._b64_chars = [], 0
        self.error = self.error or error

    def _line(self, line: str) -> str:
        if self._mid_line:
            self._mid_line = False
            return line
        bare = line.rstrip("\n").rstrip("\r")
        if not self.started:
            if bare == self._start:
                self.started = True
            elif self._preamble_size < MAX_PREAMBLE:
                self.preamble.append(line[: MAX_PREAMBLE - self._preamble_size])
                self._preamble_size += len(self.preamble[-1])
            return ""
        if self.complete:
            return line  # after the authentic frame: nothing more is taken as one
        if bare.startswith(self._begin):
            # A begin line inside a frame cannot be archive text (base64 has no "_"): the
            # frame before it was not the wrapper's, and this one may be.
            self._abandon_frame_quietly()
            try:
                self._candidate = _read_header(bare[len(self._begin) :])
            except ValueError as exc:
                self.error = f"the output archive header is unreadable: {exc}"
                return ""
            self._begin_line = bare
            self._b64_limit = 4 * (self._candidate.get("bytes", 0) + 2) // 3 + 4
            self._in_frame = True
            return ""
        if not self._in_frame:
            return line
        if bare.startswith(self._end):
            self._finish(bare[len(self._end) :].strip())
        else:
            self._b64_chars += len(bare)
            if self._b64_chars <= self._b64_limit:
                self._b64.append(bare)
        return ""

    def _abandon_frame_quietly(self) -> None:
        if self._in_frame:
            self.forged += 1
        self._in_frame = False
        self._candidate = None
        self._b64, self._b64_chars = [], 0

    def _finish(self, end: str) -> None:
        digest, _, mac = end.partition(" ")
        header = self._candidate or {}
        self._in_frame = False
        self._candidate = None
        b64, self._b64 = self._b64, []
        if not hmac.compare_digest(mac.strip(), frame_mac(self._key, self._begin_line, digest)):
            self.forged += 1
            return
        if digest != header.get("sha256"):
            self.error = "the output archive's end line does not match its header"
            return
        self.header = header
        self.complete = True
        if header.get("transport") != "log":
            return
        if self._b64_chars > self._b64_limit:
            self.error = f"the output archive is longer than its header's {header.get('bytes')} bytes"
            return
        try:
            data = base64.b64decode("".join(b64), validate=True)
        except ValueError as exc:
            self.error = f"the output archive is not valid base64: {exc}"
            return
        if hashlib.sha256(data).hexdigest() != digest:
            self.error = "the output archive's sha256 does not match (damaged in the log)"
            return
        self.data = data
