"""Checking a ``.tar.gz`` whole before ``tarfile`` reads it.

``tarfile`` trusts what it reads: the gzip checksum is seen only if the stream is read to its
end, nothing bounds the member count or the unpacked size, and the pax header parser of the
Python versions episcope supports backtracks quadratically on a crafted record (a 1 KB
archive can keep it busy for minutes). :func:`check_tar_gz` walks the decompressed stream
once, block by block, with ``tarfile``'s own single-header decoder (``TarInfo.frombuf``), and
refuses the archive unless

- every header checksum is right and the gzip stream ends with its CRC and length intact;
- extended headers (pax, GNU long names) are at most ``header_bytes`` each, and every pax
  record is well formed (``<length> <keyword>=<value>\\n``, lengths adding up) with a
  keyword from ``PAX_KEYWORDS`` (no ``size`` or sparse maps, which would move where the
  next header starts and so make ``tarfile`` read a different archive than this check);
- members, declared bytes and the decompressed stream stay within the limits.

Only then is the archive handed to ``tarfile``, which then parses nothing this check has not
bounded. Standard library only.
"""

from __future__ import annotations

import gzip
import re
import tarfile
import zlib
from dataclasses import dataclass
from typing import BinaryIO

BLOCK = 512
READ_SIZE = 1 << 20

PAX_KEYWORDS = frozenset({b"path", b"linkpath", b"mtime", b"atime", b"ctime", b"uid", b"gid", b"uname", b"gname",
                          b"comment", b"charset", b"hdrcharset"})
PAX_KEYWORD_PREFIXES = (b"SCHILY.", b"LIBARCHIVE.")  # extended attributes, which tarfile keeps aside
EXTENDED_TYPES = frozenset({tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE,
                            tarfile.GNUTYPE_LONGNAME, tarfile.GNUTYPE_LONGLINK})
PAX_TYPES = frozenset({tarfile.XHDTYPE, tarfile.XGLTYPE, tarfile.SOLARIS_XHDTYPE})
_PAX_LENGTH = re.compile(rb"([0-9]{1,20}) ")


class TarRefused(ValueError):
    """The archive is damaged or over a limit (message is one line)."""


@dataclass(frozen=True)
class TarLimits:
    members: int = 100_000
    total_bytes: int = 1 << 30  # declared member sizes together
    header_bytes: int = 16 << 10  # one pax or long-name header
    stream_bytes: int = (1 << 30) + (64 << 20)  # the decompressed stream, headers and padding included


@dataclass(frozen=True)
class TarSummary:
    members: int
    total_bytes: int


def _padded(size: int) -> int:
    return -(-size // BLOCK) * BLOCK


class _Stream:
    """The decompressed bytes, counted against the stream limit."""

    def __init__(self, gz: gzip.GzipFile, limit: int) -> None:
        self.gz, self.limit, self.offset = gz, limit, 0

    def read(self, size: int) -> bytes:
        if self.offset + size > self.limit:
            raise TarRefused(f"unpacks to more than {self.limit} bytes")
        data = self.gz.read(size)
        self.offset += len(data)
        return data

    def exactly(self, size: int) -> bytes:
        data = self.read(size)
        if len(data) != size:
            raise TarRefused(f"truncated at byte {self.offset} of the unpacked stream")
        return data

    def skip(self, size: int) -> None:
        while size > 0:
            step = min(size, READ_SIZE)
            self.exactly(step)
            size -= step

    def drain(self) -> None:
        """Read to the end, so gzip checks the CRC and length of every member."""
        while self.read(READ_SIZE):
            pass


def check_pax_records(data: bytes) -> None:
    pos = 0
    while pos < len(data):
        match = _PAX_LENGTH.match(data, pos)
        if match is None:
            raise TarRefused(f"malformed pax record at byte {pos} of its header")
        end = pos + int(match.group(1))
        if end <= match.end() or end > len(data) or data[end - 1] != 0x0A:
            raise TarRefused(f"malformed pax record at byte {pos} of its header")
        keyword, equals, _ = data[match.end():end - 1].partition(b"=")
        if not equals:
            raise TarRefused(f"malformed pax record at byte {pos} of its header")
        if keyword not in PAX_KEYWORDS and not keyword.startswith(PAX_KEYWORD_PREFIXES):
            raise TarRefused(f"pax keyword {keyword[:40]!r} is not accepted")
        pos = end


def check_tar_gz(fileobj: BinaryIO, limits: TarLimits = TarLimits()) -> TarSummary:
    """Walk the whole archive (see the module docstring); raises TarRefused."""
    members = total = 0
    try:
        with gzip.GzipFile(fileobj=fileobj, mode="rb") as gz:
            stream = _Stream(gz, limits.stream_bytes)
            while True:
                block = stream.exactly(BLOCK)
                if block == bytes(BLOCK):
                    stream.drain()  # the end-of-archive blocks, padding, and the gzip trailer
                    return TarSummary(members, total)
                info = tarfile.TarInfo.frombuf(block, "utf-8", "surrogateescape")
                if info.type in EXTENDED_TYPES:
                    if info.size > limits.header_bytes:
                        raise TarRefused(f"extended header of {info.size} bytes (limit {limits.header_bytes})")
                    data = stream.exactly(_padded(info.size))[:info.size]
                    if info.type in PAX_TYPES:
                        check_pax_records(data)
                    continue
                if info.type == tarfile.GNUTYPE_SPARSE:
                    raise TarRefused(f"sparse member {info.name[:80]!r}")
                members += 1
                total += info.size
                if members > limits.members:
                    raise TarRefused(f"more than {limits.members} members")
                if total > limits.total_bytes:
                    raise TarRefused(f"members add up to more than {limits.total_bytes} bytes")
                if info.type in tarfile.REGULAR_TYPES or info.type not in tarfile.SUPPORTED_TYPES:
                    stream.skip(_padded(info.size))  # where tarfile, too, finds data before the next header
    except tarfile.HeaderError as exc:
        raise TarRefused(f"bad tar header: {exc}") from None
    except (gzip.BadGzipFile, zlib.error, EOFError) as exc:
        raise TarRefused(f"damaged gzip stream: {exc or 'ends early'}") from None
