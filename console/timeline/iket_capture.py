"""Run a workload under NVIDIA's ``run-iket`` profiler and keep everything it wrote.

Each capture gets a fresh ``attempt-NNN`` directory under the output directory (an earlier
attempt is never reused or overwritten). The profiler's own output directory, its stdout and
stderr, and ``capture.json`` (profiler path and SHA-256, command, exit code, every output with
its SHA-256) stay there. A capture is accepted only when the profiler exited 0 and wrote at
least one non-empty ``*.trace.json`` and one non-empty ``*.pftrace``.
Standard library only: this runs on the GPU machine.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from console.formats.plainjson import atomic_write_bytes

from .files import json_bytes, sha256_file

CAPTURE_SCHEMA = "atrex-autonomous-timeline-iket-capture/v1"
CAPTURE_NAME = "capture.json"
PROFILER_DIR = "iket_output"


class IketCaptureError(ValueError):
    pass


def find_profiler(explicit: str | None = None) -> Path:
    """``run-iket`` from the flag, else PATH, else beside the running interpreter."""
    candidates = [explicit] if explicit else [shutil.which("run-iket"), str(Path(sys.executable).parent / "run-iket")]
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return Path(candidate).resolve()
    raise IketCaptureError("run-iket not found (install nvidia-cutlass-dsl or pass --run-iket)")


def fresh_attempt_dir(output_dir: Path) -> Path:
    output_dir.mkdir(parents=True, exist_ok=True)
    for ordinal in range(1, 10_000):
        attempt = output_dir / f"attempt-{ordinal:03d}"
        try:
            attempt.mkdir()
        except FileExistsError:
            continue
        return attempt
    raise IketCaptureError(f"{output_dir}: no free attempt directory")


def _outputs(profiler_dir: Path, attempt: Path) -> dict[str, list[dict]]:
    """Every file the profiler wrote, grouped by kind, with size and SHA-256."""
    groups: dict[str, list[dict]] = {"trace_json": [], "pftrace": [], "tracker": [], "raw_capture": [], "other": []}
    for path in sorted(p for p in profiler_dir.rglob("*") if p.is_file()):
        name = path.name
        kind = ("trace_json" if name.endswith(".trace.json") else "pftrace" if name.endswith(".pftrace")
                else "tracker" if name == "tracker.json" else "raw_capture" if name == "iket.data.json"
                else "other")
        groups[kind].append({"path": path.relative_to(attempt).as_posix(), "bytes": path.stat().st_size,
                             "sha256": sha256_file(path)})
    return groups


def capture(command: list[str], output_dir: str | os.PathLike, *, run_iket: str | None = None,
            extra_profile_args: tuple[str, ...] = (), timeout: float = 600.0) -> tuple[Path, dict, list[str]]:
    """Run ``command`` under ``run-iket profile --keep --postprocess all``; return (attempt, record, problems)."""
    if not command:
        raise IketCaptureError("no workload command after --")
    profiler = find_profiler(run_iket)
    attempt = fresh_attempt_dir(Path(output_dir))
    profiler_dir = attempt / PROFILER_DIR
    argv = [str(profiler), "--output-dir", str(profiler_dir), "profile", "--keep", "--postprocess", "all",
            *extra_profile_args, "--", *command]
    started = time.time()
    timed_out = False
    with open(attempt / "profiler.stdout.log", "wb") as out, open(attempt / "profiler.stderr.log", "wb") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, start_new_session=True)
        try:
            exit_code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            exit_code = proc.wait()
            timed_out = True
        except BaseException:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    outputs = _outputs(profiler_dir, attempt) if profiler_dir.is_dir() else {}
    problems = []
    if timed_out:
        problems.append(f"run-iket exceeded {timeout:g} s and was killed")
    if exit_code != 0:
        problems.append(f"run-iket exited {exit_code} (see {attempt / 'profiler.stderr.log'})")
    for kind, suffix in (("trace_json", "*.trace.json"), ("pftrace", "*.pftrace")):
        if not any(item["bytes"] > 0 for item in outputs.get(kind, [])):
            problems.append(f"no non-empty {suffix} under {profiler_dir}")
    record = {
        "schema": CAPTURE_SCHEMA,
        "command": list(command),
        "profiler_argv": argv,
        "profiler": {"path": str(profiler), "sha256": sha256_file(profiler)},
        "exit_code": exit_code,
        "timed_out": timed_out,
        "started_unix_s": round(started, 3),
        "wall_s": round(time.time() - started, 3),
        "logs": {"stdout": "profiler.stdout.log", "stderr": "profiler.stderr.log"},
        "outputs": outputs,
        "accepted": not problems,
        "problems": problems,
    }
    atomic_write_bytes(attempt / CAPTURE_NAME, json_bytes(record))
    return attempt, record, problems
