"""Copying a workspace into a job's own directory, and copying its outputs back.

The command never runs in the workspace itself: it gets a copy without the episode's
protected and bulky parts (the skills come along read-only), and only the requested output
paths come back. Nothing that could escape the workspace crosses in either direction: no
absolute paths, no ``..``, no symbolic links, no file over the size limit, no tree deeper,
more numerous or larger than the output limits. The private shapes table stays outside:
only the one case a profile asks for is written into the copy.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from console.formats.plainjson import atomic_replacement

from .request import PRIVATE_CASE_NAME, PRIVATE_SHAPES_ENV, JobRequest

# Top-level workspace entries a job never sees: episode memory and plans, git metadata and
# the supervisor's own state (which also holds the job directories).
EXCLUDED_TOP = frozenset({"memory", "plans", ".git", ".atrex_long_horizon"})
# Top-level entries a job reads but never changes: the skills, whose scripts and backends run
# inside jobs (the timeline adapter, ``timeline.py profile-iket``). Their staged files are
# read-only and nothing under them is synced back, so the workspace's skills stay as written.
READ_ONLY_TOP = frozenset({"skills"})
READ_ONLY_MODE_MASK = ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)
RAW_PROFILE_SUFFIXES = (".ncu-rep", ".nsys-rep", ".qdrep")
HARNESS_DIR = "harness"
# A tree is walked no deeper than this many directories below the workspace or the stage
# (os.walk recurses once per level), and a job brings back at most so many files and bytes.
MAX_TREE_DEPTH = 64
MAX_OUTPUT_FILES = 10_000
MAX_OUTPUT_TOTAL_BYTES = 1024 * 1024 * 1024


class StagingError(Exception):
    """A refused input or an unusable private shape; the message is one line."""


@dataclass
class StageReport:
    files: int = 0
    skipped: list[dict] = field(default_factory=list)  # {"path", "reason"}
    # rel path -> (size, mtime_ns) of every staged file, to tell outputs from inputs later
    manifest: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class SyncReport:
    synced: list[str] = field(default_factory=list)
    refused: list[dict] = field(default_factory=list)  # {"path", "reason"}


def _mb(size: int) -> str:
    return f"{size / (1024 * 1024):.1f} MB"


def _is_raw_profile(name: str) -> bool:
    return name.endswith(RAW_PROFILE_SUFFIXES)


def _copy_file(src: Path, dst: Path) -> None:
    dst.parent.mkdir(parents=True, exist_ok=True)
    shutil.copy2(src, dst, follow_symlinks=False)


def harness_dirs(argv: tuple[str, ...] | list[str], workspace: Path) -> list[str]:
    """Directories ``.../harness`` that hold a file the command names.

    A fallback profiling driver lives in ``<PROFILE_DIR>/harness/`` with helpers beside it,
    so naming the driver brings its whole directory along.
    """
    found: list[str] = []
    for arg in argv:
        candidate = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if not candidate or candidate.startswith("/"):
            continue
        parts = PurePosixPath(candidate).parts
        if ".." in parts or HARNESS_DIR not in parts[:-1]:
            continue
        cut = len(parts) - 1 - parts[:-1][::-1].index(HARNESS_DIR)
        rel = str(PurePosixPath(*parts[:cut]))
        if (workspace / rel).is_dir() and rel not in found:
            found.append(rel)
    return found


def _check_no_links(root: Path, rel: str) -> Path:
    """Return ``root/rel`` after refusing a path that passes through a symbolic link."""
    path = root
    for part in PurePosixPath(rel).parts:
        path = path / part
        if path.is_symlink():
            raise StagingError(f"{rel!r} refused: {path.relative_to(root)} is a symbolic link")
    return path


def _stage_input(workspace: Path, stage: Path, rel: str, limit: int, report: StageReport, what: str) -> None:
    src = _check_no_links(workspace, rel)
    if not src.exists():
        raise StagingError(f"{what} {rel!r} does not exist in the workspace")
    if src.is_file():
        entries = [(src, rel)]
    elif src.is_dir():
        entries = []
        for dirpath, dirnames, filenames in os.walk(src):
            for name in sorted(dirnames + filenames):
                full = Path(dirpath) / name
                if full.is_symlink():
                    raise StagingError(f"{what} {rel!r} refused: {full.relative_to(workspace)} is a symbolic link")
            entries.extend((Path(dirpath) / n, str((Path(dirpath) / n).relative_to(workspace))) for n in filenames)
    else:
        raise StagingError(f"{what} {rel!r} is not a regular file or directory")
    for full, name in entries:
        info = full.lstat()
        if not stat.S_ISREG(info.st_mode):
            raise StagingError(f"{what} {name!r} is not a regular file")
        if info.st_size > limit:
            raise StagingError(f"{what} {name!r} is {_mb(info.st_size)}, over --max-input-file-mb ({_mb(limit)})")
        if _is_raw_profile(name):
            continue
        _copy_file(full, stage / name)
        copied = (stage / name).stat()
        report.manifest[name] = (copied.st_size, copied.st_mtime_ns)
        report.files += 1


def stage_workspace(request: JobRequest, stage: Path, private_case: dict | None = None) -> StageReport:
    """Copy the workspace (minus the excluded parts) and the requested inputs into ``stage``.

    Workspace files that cannot travel (links, raw profiler reports, files over the input
    limit) are skipped and listed; an explicitly requested input that cannot travel is
    refused with :class:`StagingError`.
    """
    workspace = Path(request.workspace)
    limit = request.max_input_bytes
    report = StageReport()
    stage.mkdir(parents=True, exist_ok=True)
    for dirpath, dirnames, filenames in os.walk(workspace):
        here = Path(dirpath)
        rel_dir = here.relative_to(workspace)
        keep = []
        for name in sorted(dirnames):
            rel = str(rel_dir / name)
            if here == workspace and name in EXCLUDED_TOP:
                continue
            if len(rel_dir.parts) >= MAX_TREE_DEPTH:
                report.skipped.append({"path": rel, "reason": f"deeper than {MAX_TREE_DEPTH} directories"})
                continue
            if (here / name).is_symlink():
                report.skipped.append({"path": rel, "reason": "symbolic link"})
                continue
            keep.append(name)
        dirnames[:] = keep
        for name in sorted(filenames):
            full = here / name
            rel = str(rel_dir / name)
            info = full.lstat()
            if stat.S_ISLNK(info.st_mode):
                report.skipped.append({"path": rel, "reason": "symbolic link"})
            elif not stat.S_ISREG(info.st_mode):
                report.skipped.append({"path": rel, "reason": "not a regular file"})
            elif _is_raw_profile(name):
                continue
            elif info.st_size > limit:
                report.skipped.append({"path": rel, "reason": f"{_mb(info.st_size)}, over --max-input-file-mb"})
            else:
                _copy_file(full, stage / rel)
                copied = (stage / rel).stat()
                report.manifest[rel] = (copied.st_size, copied.st_mtime_ns)
                report.files += 1
    for rel in request.inputs:
        _stage_input(workspace, stage, rel, limit, report, "--input")
    for rel in harness_dirs(request.argv, workspace):
        _stage_input(workspace, stage, rel, limit, report, "harness")
    if private_case is not None:
        (stage / PRIVATE_CASE_NAME).write_text(json.dumps(private_case, sort_keys=True) + "\n")
    _make_read_only(stage)
    return report


def _make_read_only(stage: Path) -> None:
    """Take the write bits off every staged file under the read-only entries.

    Directories keep theirs: Python writes ``__pycache__`` beside an imported module, and the
    stage is removed after the job. What protects the workspace is that nothing under these
    entries is synced back; the file modes make an accidental write fail where it happens.
    """
    for top in sorted(READ_ONLY_TOP):
        for dirpath, _dirnames, filenames in os.walk(stage / top):
            for name in filenames:
                path = Path(dirpath) / name
                path.chmod(stat.S_IMODE(path.lstat().st_mode) & READ_ONLY_MODE_MASK)


def resolve_private_case(request: JobRequest, table_path: str | None) -> dict | None:
    """The one private case a profile asks for with PROFILE_SHAPE_ID, or ``None``.

    The table is the operator's (EPISCOPE_PRIVATE_SHAPES names it, outside the workspace;
    see ``private_shapes``); a job only ever receives the single case, under an opaque id.
    """
    shape_id = request.env.get("PROFILE_SHAPE_ID")
    if request.kind != "profile" or not table_path or not shape_id:
        return None
    table = Path(table_path).resolve()
    workspace = Path(request.workspace)
    if table == workspace or workspace in table.parents:
        raise StagingError(f"{PRIVATE_SHAPES_ENV} must name a file outside the workspace")
    try:
        data = json.loads(table.read_bytes())
    except (OSError, ValueError) as exc:
        raise StagingError(f"private shapes table unreadable: {type(exc).__name__}") from None
    if not isinstance(data, dict):
        raise StagingError("private shapes table is not a JSON object of id -> case")
    case = data.get(shape_id)
    if not isinstance(case, dict):
        # Say nothing about which ids exist: the table is private.
        raise StagingError(f"PROFILE_SHAPE_ID {shape_id!r} is not a known shape")
    return case


def _target_in_workspace(workspace: Path, rel: str) -> Path:
    """The workspace path for an output, refusing one that would be written through a link."""
    path = workspace
    for part in PurePosixPath(rel).parts:
        path = path / part
        if path.is_symlink():
            raise ValueError(f"workspace path {path.relative_to(workspace)} is a symbolic link")
    return path


def _write_back(src: Path, dst: Path) -> None:
    with atomic_replacement(dst) as fresh:
        shutil.copy2(src, fresh, follow_symlinks=False)


def sync_back(request: JobRequest, stage: Path, manifest: dict[str, tuple[int, int]]) -> SyncReport:
    """Copy new or changed files under the ``--sync`` paths from ``stage`` into the workspace."""
    workspace = Path(request.workspace)
    limit = request.max_output_bytes
    report = SyncReport()
    budget = {"files": MAX_OUTPUT_FILES, "bytes": MAX_OUTPUT_TOTAL_BYTES}

    def refuse(rel: str, reason: str) -> None:
        report.refused.append({"path": rel, "reason": reason})

    for root_rel in request.sync:
        top = stage / root_rel
        if not os.path.lexists(top):
            continue
        if PurePosixPath(root_rel).parts[0] in READ_ONLY_TOP:
            refuse(root_rel, "read-only in a job")
            continue
        try:
            _check_no_links(stage, root_rel)
        except StagingError:
            refuse(root_rel, "symbolic link")
            continue
        if top.is_file():
            candidates = [root_rel]
        else:
            candidates = []
            for dirpath, dirnames, filenames in os.walk(top):
                here = Path(dirpath)
                keep = []
                for name in sorted(dirnames):
                    rel = str((here / name).relative_to(stage))
                    if (here / name).is_symlink():
                        refuse(rel, "symbolic link")
                    elif len(here.relative_to(stage).parts) >= MAX_TREE_DEPTH:
                        refuse(rel, f"deeper than {MAX_TREE_DEPTH} directories")
                    else:
                        keep.append(name)
                dirnames[:] = keep
                candidates.extend(str((here / n).relative_to(stage)) for n in sorted(filenames))
                if len(candidates) > MAX_OUTPUT_FILES:
                    break  # past the file limit: nothing more is looked at
        for rel in candidates:
            src = stage / rel
            info = src.lstat()
            if stat.S_ISLNK(info.st_mode):
                refuse(rel, "symbolic link")
                continue
            if not stat.S_ISREG(info.st_mode):
                refuse(rel, "not a regular file")
                continue
            if manifest.get(rel) == (info.st_size, info.st_mtime_ns):
                continue  # staged in and left untouched
            if _is_raw_profile(rel) and not request.include_raw_profile:
                refuse(rel, "raw profiler report (pass --include-raw-profile)")
                continue
            if info.st_size > limit:
                refuse(rel, f"{_mb(info.st_size)}, over --max-output-file-mb ({_mb(limit)})")
                continue
            if budget["files"] < 1 or budget["bytes"] < info.st_size:
                refuse(rel, f"over the output limit of {MAX_OUTPUT_FILES} files and {_mb(MAX_OUTPUT_TOTAL_BYTES)}")
                break
            budget["files"] -= 1
            budget["bytes"] -= info.st_size
            try:
                dst = _target_in_workspace(workspace, rel)
                if dst.is_dir():
                    raise ValueError("a directory of that name exists in the workspace")
                _write_back(src, dst)
            except (OSError, ValueError) as exc:
                refuse(rel, str(exc) if isinstance(exc, ValueError) else (exc.strerror or str(exc)))
                continue
            report.synced.append(rel)
    return report
