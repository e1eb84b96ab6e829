"""What the GPU machine itself checks of the evaluator, ABBA and sandbox-job formats.

The GPU machine has the standard library, numpy, cupy and pynvml, and no msgspec, yet three
of its tools must judge these formats on their own:

- the sandbox refuses a malformed ``RESULT_JSON`` (exit 2) and never appends an
  ``evaluations.jsonl`` line the host's reader would refuse (:func:`evaluation_record`);
- ``tools/abba.py`` turns a malformed run into an ERROR verdict and scores the rest with
  the same rule the host's reader uses (:func:`abba_verdict`);
- the sandbox re-reads its own job record to cancel a job or to notice that the process
  running it is gone (:func:`read_job_record`).

The host reads the same documents as msgspec records (``evaluations``, ``abba``,
``job_record``) whose types state these checks again; a test pins that both sides accept
and refuse the same inputs. Messages name the field path as the host's do.
"""

from __future__ import annotations

import math
import os
import re
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from .plainjson import loads, read_json_document
from .problems import FormatError, ReadResult

RESULT_PREFIX = "[test_kernel] RESULT_JSON="
PROFILE_PREFIX = "[sandbox] PROFILE_JSON="  # the sandbox's line of a profile job's result
ABBA_PREFIX = "__ATREX_LONG_HORIZON_ABBA_RESULT__="
EVALUATION_SCHEMA = 2  # of the evaluations.jsonl records written here
GATEWAY_KINDS = ("run", "dev")
REVISIONS = ("incumbent", "candidate")
GATES = ("PASS", "FAIL", "ERROR")
PAYLOAD_SCHEMA = 1  # of an ABBA run payload

JOB_SCHEMA = "episcope-sandbox-job/v1"
JOB_STATES = ("queued", "running", "succeeded", "failed", "cancelled", "timed_out", "lost")
# lost: the sandbox process died before it could record an outcome (its processes are ended).
TERMINAL_STATES = frozenset({"succeeded", "failed", "cancelled", "timed_out", "lost"})
SANDBOX_DIR = Path(".atrex_long_horizon") / "sandbox"
RECORD_NAME = "job.json"
# At most four jobs of one workspace run at once (FORMATS §8): the sandbox's slots, the
# console's refusal and the concurrency guard all count against this one number.
MAX_SANDBOX_JOBS = 4

_SHA256 = re.compile(r"[0-9a-f]{64}")


def loads_lenient(data: bytes | str) -> Any:
    """Decode JSON with the standard library, which (unlike strict JSON) accepts the
    ``NaN``/``Infinity`` tokens Python writers emit for a kernel that produced NaNs.
    Raises :class:`FormatError` with a one-line reason."""
    try:
        return loads(data)
    except RecursionError:
        raise FormatError("invalid JSON: nested too deeply") from None
    except (ValueError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError
        raise FormatError(f"invalid JSON: {exc}") from None


# -- type checks -------------------------------------------------------------------------


def _json_type(value: Any) -> str:
    for kind, name in ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (list, "array"), (dict, "object")):
        if isinstance(value, kind):
            return name
    return "null" if value is None else type(value).__name__


def _object(obj: Any, where: str | None) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise FormatError(f"{where or 'document'}: Expected `object`, got `{_json_type(obj)}`")
    return obj


def _path(where: str | None, key: str) -> str:
    return f"{where}.{key}" if where else key


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


_KINDS: dict[Any, Any] = {
    str: lambda v: isinstance(v, str),
    int: _is_int,
    float: _is_number,
    bool: lambda v: isinstance(v, bool),
    dict: lambda v: isinstance(v, dict),
    list: lambda v: isinstance(v, list),
    "ident": lambda v: isinstance(v, str) or _is_int(v),
    "strings": lambda v: isinstance(v, list),
    "numbers": lambda v: isinstance(v, dict),
}


def _check(obj: dict[str, Any], where: str | None, required: Iterable[str], **kinds: Any) -> None:
    """Each named field absent, ``null`` or of its kind: ``str``, ``int``, ``float`` (any
    number), ``bool``, ``dict``, ``list``, ``"ident"`` (str or int), ``"strings"`` (array of str),
    ``"numbers"`` (object of numbers or nulls), a tuple of allowed strings."""
    for key in required:
        if obj.get(key) is None:
            raise FormatError(f"{_path(where, key)}: Object missing required field `{key}`")
    for key, kind in kinds.items():
        value = obj.get(key)
        if value is None:
            continue
        path = _path(where, key)
        if isinstance(kind, tuple):
            if value not in kind or not isinstance(value, str):
                raise FormatError(f"{path}: Invalid enum value {value!r}")
            continue
        ok = _KINDS[kind](value)
        if not ok:
            raise FormatError(f"{path}: Expected `{kind if isinstance(kind, str) else kind.__name__}`, "
                              f"got `{_json_type(value)}`")
        if kind == "strings":
            for index, item in enumerate(value):
                if not isinstance(item, str):
                    raise FormatError(f"{path}[{index}]: Expected `str`, got `{_json_type(item)}`")
        if kind == "numbers":
            for name, number in value.items():
                if number is not None and not _is_number(number):
                    raise FormatError(f"{path}[{name!r}]: Expected `float | null`, got `{_json_type(number)}`")


# -- evaluator results (FORMATS §6) ------------------------------------------------------


def check_result(obj: Any, where: str | None = None) -> dict[str, Any]:
    """A decoded RESULT_JSON object, type-checked; ``all_pass`` is required."""
    result = _object(obj, where)
    _check(result, where, ("all_pass",), all_pass=bool, failures="strings", latency_us_geomean=float,
           latency_us=float, latency_us_arith_mean=float, latency_us_by_shape="numbers",
           speedup_vs_ref_geomean=float, max_abs_err=float, max_rel_err=float, evaluator=str, eval_id="ident",
           performance_objective=str, performance_score=float)
    return result


def parse_result_line(line: str) -> dict[str, Any]:
    """The object of one ``[test_kernel] RESULT_JSON=`` line; raise :class:`FormatError`."""
    text = line.strip()
    if not text.startswith(RESULT_PREFIX):
        raise FormatError("not a RESULT_JSON line")
    return check_result(loads_lenient(text[len(RESULT_PREFIX):]))


def result_latency(result: dict[str, Any]) -> Any:
    """The geometric-mean latency; older evaluators name it ``latency_us``."""
    geomean = result.get("latency_us_geomean")
    return result.get("latency_us") if geomean is None else geomean


def evaluation_record(
    result: Any,
    *,
    kernel_sha256: str,
    gateway_kind: str,
    job_id: str | None,
    timestamp: str | None = None,
) -> dict[str, Any]:
    """A schema-2 ``evaluations.jsonl`` record for a writer to append.

    The result is checked first, so a writer never appends a line its own reader refuses.
    """
    check_result(result, "result")
    if not isinstance(kernel_sha256, str) or not _SHA256.fullmatch(kernel_sha256):
        raise FormatError("kernel_sha256 must be 64 lowercase hex digits")
    if gateway_kind not in GATEWAY_KINDS:
        raise FormatError(f"gateway_kind is {gateway_kind!r}, not one of {', '.join(GATEWAY_KINDS)}")
    if job_id is not None and not isinstance(job_id, str):
        raise FormatError("job_id must be a string")
    return {
        "schema_version": EVALUATION_SCHEMA,
        "timestamp": timestamp or datetime.now(UTC).isoformat(),
        "gateway_kind": gateway_kind,
        "job_id": job_id,
        "kernel_sha256": kernel_sha256,
        "result": result,
    }


# -- ABBA runs and the verdict (FORMATS §7) ----------------------------------------------


def abba_schedule(repeats: int) -> list[str]:
    """Revisions in run order: repeat r is incumbent,candidate when r is even, else
    candidate,incumbent (R=2 gives I C C I)."""
    if not _is_int(repeats) or repeats < 1:
        raise ValueError(f"repeats must be a positive integer, not {repeats!r}")
    order: list[str] = []
    for repeat in range(repeats):
        order.extend(REVISIONS if repeat % 2 == 0 else REVISIONS[::-1])
    return order


def positive_finite(value: Any) -> float | None:
    """The value as a float when it is a usable latency (finite and > 0), else ``None``."""
    if not _is_number(value):
        return None
    number = float(value)
    return number if number > 0.0 and math.isfinite(number) else None


def counted_latency(exit_code: int | None, all_pass: bool | None, latency: Any) -> float | None:
    """A run's latency when it counts toward the verdict (exit 0, all_pass, and a usable
    latency), else ``None``."""
    if exit_code != 0 or all_pass is not True:
        return None
    return positive_finite(latency)


def check_run(obj: Any, where: str | None = None) -> tuple[str, int, float | None]:
    """One ABBA run record, type-checked, as (revision, repeat, counted latency)."""
    run = _object(obj, where)
    _check(run, where, ("revision", "repeat"), revision=REVISIONS, repeat=int, exit_code=int,
           stdout_tail=str, stderr_tail=str)
    result = run.get("result")
    if result is not None:
        check_result(result, _path(where, "result"))
        latency = counted_latency(run.get("exit_code"), result["all_pass"], result_latency(result))
    else:
        latency = None
    return run["revision"], run["repeat"], latency


def geometric_mean(values: Iterable[float]) -> float | None:
    values = list(values)
    if not values or any(positive_finite(v) is None for v in values):
        return None
    return math.exp(math.fsum(math.log(v) for v in values) / len(values))


def abba_verdict(
    runs: Iterable[tuple[str, int, float | None]], repeats: int, min_improvement_pct: float = 0.0
) -> dict[str, Any]:
    """The §7 gate over (revision, repeat, counted latency) of an R-repeat schedule (pure):
    ``{gate, candidate_latency_us, incumbent_latency_us, improvement_pct, error}``."""
    runs = list(runs)

    def verdict(gate: str, cand: float | None = None, inc: float | None = None,
                improvement: float | None = None, error: str | None = None) -> dict[str, Any]:
        return {"gate": gate, "candidate_latency_us": cand, "incumbent_latency_us": inc,
                "improvement_pct": improvement, "error": error}

    if not _is_int(repeats) or repeats < 1:
        return verdict("ERROR", error=f"repeats must be a positive integer, not {repeats!r}")
    expected = [(revision, index // 2) for index, revision in enumerate(abba_schedule(repeats))]
    if [(revision, repeat) for revision, repeat, _ in runs] != expected:
        return verdict("ERROR", error=f"runs do not follow the ABBA schedule for {repeats} repeats")
    sides: dict[str, list[float]] = {revision: [] for revision in REVISIONS}
    for revision, _, latency in runs:
        if latency is not None:
            sides[revision].append(latency)
    cand = geometric_mean(sides["candidate"])
    inc = geometric_mean(sides["incumbent"])
    if len(sides["candidate"]) < repeats or len(sides["incumbent"]) < repeats:
        return verdict("FAIL", cand, inc, error=(
            f"only {len(sides['candidate'])} of {repeats} candidate and "
            f"{len(sides['incumbent'])} of {repeats} incumbent runs are valid"))
    assert cand is not None and inc is not None  # every run counted has a positive finite latency
    improvement = (inc - cand) / inc * 100.0
    if improvement > min_improvement_pct:
        return verdict("PASS", cand, inc, improvement)
    return verdict("FAIL", cand, inc, improvement,
                   f"improvement {improvement:.3f}% does not exceed {min_improvement_pct:.3f}%")


# -- sandbox job records (FORMATS §8) ----------------------------------------------------


def job_dir(workspace: str | os.PathLike[str], job_id: str) -> Path:
    return Path(workspace) / SANDBOX_DIR / job_id


def check_job_record(obj: Any) -> dict[str, Any]:
    """A job record, type-checked: ``schema``, ``job_id`` and ``state`` are required."""
    record = _object(obj, None)
    _check(record, None, ("schema", "job_id", "state"), schema=(JOB_SCHEMA,), job_id=str, state=JOB_STATES,
           argv="strings", kind=str, backend=str, workspace=str, created_at=str, started_at=str,
           finished_at=str, exit_code=int, result_code=int, sync="strings", timeout=float, pid=int, pgid=int,
           sandbox_pid=int, launcher=str, slot=int, operation_id=str, category=str, message=str,
           synced="strings", refused=list)
    if not record["job_id"]:
        raise FormatError("job_id: Expected `str` of length >= 1")
    for index, item in enumerate(record.get("refused") or ()):
        _object(item, f"refused[{index}]")
    return record


def _runner_gone(obj: dict[str, Any]) -> bool:
    """Whether the process a record names as running its job (pid and start time) is gone."""
    pid, started = obj.get("sandbox_pid"), obj.get("sandbox_started")
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 0:
        return False  # a record that names no runner: nothing to tell
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            stat = fh.read()
    except FileNotFoundError:
        return True
    except OSError:
        return False
    fields = stat[stat.rfind(b")") + 2 :].split()
    if fields[:1] in ([b"Z"], [b"X"]):
        return True
    return isinstance(started, int) and int(fields[19]) != started  # the pid now names another process


def live_job_record(obj: Any) -> Any:
    """The record as it stands now: ``lost`` when it says queued or running but its runner is gone."""
    if isinstance(obj, dict) and obj.get("state") in ("queued", "running") and _runner_gone(obj):
        return {**obj, "state": "lost", "message": obj.get("message") or "the sandbox process running the job is gone"}
    return obj


def read_job_record(path: str | os.PathLike[str]) -> ReadResult[dict[str, Any]]:
    """A job record as it stands now (see :func:`live_job_record`), type-checked."""
    return read_json_document(path, lambda obj: check_job_record(live_job_record(obj)))
