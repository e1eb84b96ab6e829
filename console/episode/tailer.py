"""Incremental reading of append-only JSON Lines files.

A ``Tailer`` remembers how far it has read and returns only complete new lines, each with
the byte offset it starts at. A last line without its newline is held back (the writer may
be half-way through it) and read again once it is complete. A one-shot read, which no later
read will follow (``batches(final=True)``), returns that last line as it stands instead, as
AKA's own readers do (they read a file's lines, the last one included); ``unterminated``
then holds its offset, so whoever cannot parse it can say it was cut short. A file that
became shorter, or was replaced by another file (new inode), is read again from the start;
the caller learns of it through ``reset`` so it can drop what it derived from the old
content.

A file the OS refuses to read (permissions, an I/O error) stops the read where it failed;
``error`` says why, and the lines read before stay read. The next read that opens it again
starts from the beginning with ``reset`` set, so the caller drops the error it showed along
with what it derived, and gets the whole file.

A file truncated and rewritten in place can be longer than the offset again by the next
read, so its size alone does not show the rewrite. The tailer therefore keeps the last
bytes it consumed (up to ``FINGERPRINT`` of them, ending at its offset) and reads them back
with one small ``pread`` before going on; if they changed, the content it read is gone and
the file counts as truncated.

Reads go in 256 KiB chunks: a cold ingest of a multi-GB file holds one chunk (and the
records decoded from it) at a time, which measured both faster and leaner than 4 MiB.

A line longer than one chunk is read again in a chunk twice as large, up to ``max_line``
bytes. A line longer than that is no record any writer of these files makes, and reading it
whole could take all memory (one 4 GB line of zeros costs no disk in a sparse file and about
4 MB in a gzip archive). It is skipped instead, read on in chunks until its newline without
being kept, and its offset lands in ``too_long`` once; every line after it is read as usual.
A live read that finds it unfinished remembers that it is inside it and goes on from where
it stopped, never from the line's start.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator

CHUNK = 256 << 10
# The longest line read as a record. Telemetry records are under 1 KB and an evaluation
# record (one entry per shape) a few KB; a job's output line is whatever it prints, and a
# few MB of one line is already more than anyone reads. 4 MiB keeps every real line and
# bounds what one line costs (a read never exceeds it by more than one byte).
MAX_LINE = 4 << 20
# The end of a telemetry line (its closing fields and newline): differs between any two
# events that carry a timestamp or sequence number.
FINGERPRINT = 64


class Tailer:
    def __init__(self, path: str, max_line: int = MAX_LINE) -> None:
        self.path = path
        self.max_line = max_line
        self.offset = 0  # first byte not yet consumed as part of a complete line
        self._identity: tuple[int, int] | None = None
        self._fingerprint = b""  # the last bytes consumed, ending at ``offset``
        # Set by the last read: "truncated" | "replaced" | "readable again" (after ``error``).
        self.reset: str | None = None
        self.error: str | None = None  # why the last read could not read the file, if it could not
        self.unterminated: int | None = None  # offset of the last line a final read returned without its newline
        self.too_long: list[int] = []  # offsets of the lines over ``max_line`` the last read came upon
        self._inside_long_line = False  # ``offset`` is inside such a line: skip on to its newline
        # The file's mtime when last read: every line read was written by then, so it is
        # the time of a line that states none.
        self.mtime: float | None = None

    def batches(self, *, final: bool = False) -> Iterator[tuple[int, list[bytes]]]:
        """(offset of the first line, the complete lines) per chunk read.

        Empty lines are kept, so that each line's offset is the one before it plus its
        length plus one. Sets ``self.reset`` before the first batch. ``final``: no read
        will follow this one, so a last line without its newline comes too, in a batch of
        its own at ``self.unterminated``. A line longer than ``max_line`` is in no batch: the
        next one starts after it, and ``self.too_long`` holds its offset.
        """
        for base, data in self._reads(final):
            lines = data.split(b"\n")
            if base != self.unterminated:
                lines.pop()  # the incomplete tail after the last newline (often empty)
            yield base, lines

    def _reads(self, final: bool) -> Iterator[tuple[int, bytes]]:
        """(offset, bytes read) per chunk read that holds at least one complete line (or,
        when ``final``, the last line without its newline).

        The next chunk is read from the start of the incomplete tail after the last
        newline, so nothing is carried from one read to the next.
        """
        self.reset = None
        self.unterminated = None
        self.too_long = []
        failed_before, self.error = self.error is not None, None
        try:
            # Non-blocking: a FIFO under a line file's name must not hang the reader.
            fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
        except FileNotFoundError:
            if self._identity is not None or failed_before:
                self.reset = "replaced"
            self._forget()
            return
        except OSError as exc:
            self.error = str(exc)
            return
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode):
                return  # a FIFO or device is not an append-only file: nothing to read
            identity = (st.st_dev, st.st_ino)
            if failed_before:
                self.reset = "readable again"
                self._forget()
            elif self._identity is not None and identity != self._identity:
                self.reset = "replaced"
                self._forget()
            elif st.st_size < self.offset or not self._still_there(fd):
                self.reset = "truncated"
                self._forget()
            self._identity = identity
            self.mtime = st.st_mtime
            end = st.st_size
            # No read is longer than ``max_line`` + 1 bytes, so every complete line in one
            # is within the limit, and one without a newline that long starts a line over it.
            first_size = size = min(CHUNK, self.max_line + 1)
            while self.offset < end:
                if self._inside_long_line:
                    if not self._skip_long_line(fd, end):
                        break  # the file shrank while being read: the next read sees why
                    continue
                want = min(size, end - self.offset)
                data = os.pread(fd, want, self.offset)
                cut = data.rfind(b"\n")
                if cut < 0:
                    if len(data) < want:
                        break  # the file shrank while being read: the next read sees why
                    if len(data) > self.max_line:
                        self.too_long.append(self.offset)
                        self._inside_long_line = True
                        self._consume(data, len(data))
                        size = first_size
                        continue
                    if want < size:  # read to the end: the last line has no newline (yet)
                        if final:
                            self.unterminated = self.offset
                            cut = len(data) - 1  # consumed whole, as if its newline followed
                        else:
                            break
                    else:
                        size = min(size * 2, self.max_line + 1)  # a line longer than one chunk: read more at once
                        continue
                size = first_size
                base = self.offset
                self._consume(data, cut + 1)
                yield base, data
        except OSError as exc:  # an I/O error mid-file: what was read before it stays read
            self.error = str(exc)
        finally:
            os.close(fd)

    def _consume(self, data: bytes, length: int) -> None:
        """Move ``offset`` past the first ``length`` bytes of ``data``, read at ``offset``."""
        self.offset += length
        # A read that consumed fewer bytes keeps the end of the previous fingerprint.
        tail = data[max(0, length - FINGERPRINT):length]
        self._fingerprint = (self._fingerprint + tail)[-FINGERPRINT:]

    def _skip_long_line(self, fd: int, end: int) -> bool:
        """Consume the next chunk of the over-long line ``offset`` is inside, up to its
        newline if the chunk holds it (the line ends there); False if nothing was read."""
        data = os.pread(fd, min(CHUNK, end - self.offset), self.offset)
        cut = data.find(b"\n")
        if cut < 0:
            self._consume(data, len(data))
        else:
            self._consume(data, cut + 1)
            self._inside_long_line = False
        return bool(data)

    def _forget(self) -> None:
        """Start over: the file is (to be) read from its first byte."""
        self._identity = None
        self.offset = 0
        self._fingerprint = b""
        self._inside_long_line = False

    def _still_there(self, fd: int) -> bool:
        """Whether the bytes just before ``offset`` are still the ones consumed there."""
        seen = self._fingerprint
        return os.pread(fd, len(seen), self.offset - len(seen)) == seen
