"""Overhead measurement: baseline vs instrumented in fresh processes, ABBA/BAAB blocks.

Each sample is a new process that prints exactly one ``__ATREX_TIMELINE_SAMPLE__=`` line.
Blocks alternate ABBA and BAAB (A = baseline) so a slow drift cancels inside each pair of
blocks. Pairs of blocks are added until the 95% interval of the overhead is narrower than the
requested width or the block budget is spent; ``orders`` (``measure --order``) fixes the
blocks instead, in equally many ABBA and BAAB as AKA requires. Every run is appended to
``<artifact stem>.runs.jsonl`` as it completes, so a console can follow the statistics live.

The artifact is AKA's measurement file: ``schedule`` is the variant of each run in order,
``variants`` name their sources relative to the artifact's directory; the statistics,
``block_patterns`` and the stop reason are episcope's additional keys, which AKA ignores.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from console.formats.plainjson import atomic_write_bytes
from console.stats.bootstrap import bootstrap_blocks
from console.stats.intervals import hodges_lehmann
from console.stats.ranks import mann_whitney

from .files import append_line, json_bytes, sha256_file

MEASUREMENT_SCHEMA = "atrex-autonomous-timeline-measurement/v1"
RUN_SCHEMA = "atrex-autonomous-timeline-measure-run/v1"
SAMPLE_PREFIX = "__ATREX_TIMELINE_SAMPLE__="
BLOCK_PATTERNS = ("ABBA", "BAAB")
VARIANT = {"A": "baseline", "B": "instrumented"}
CONFIDENCE = 0.95
AGGREGATION = {"center": "median", "overhead_percent": "(instrumented_ms / baseline_ms - 1) * 100"}


class MeasureError(RuntimeError):
    """The measurement cannot stand (a failed run, drift, a changed source)."""


@dataclass
class MeasureConfig:
    baseline_command: list[str]
    instrumented_command: list[str]
    baseline_source: str
    instrumented_source: str
    output: str
    baseline_binary: str | None = None
    instrumented_binary: str | None = None
    warmup: int = 10
    iterations: int = 100
    min_blocks: int = 2
    max_blocks: int = 2
    ci_width: float | None = None  # percentage points; None: run exactly max_blocks
    target_percent: float = 10.0
    timeout: float = 300.0
    workload_identity: str | None = None
    cwd: str | None = None
    env: dict = field(default_factory=dict)
    orders: list[str] | None = None  # fixed blocks ("ABBA", "BAAB"), instead of the adaptive loop


def runs_log_path(output: str | os.PathLike) -> Path:
    out = Path(output)
    return out.with_name(out.stem + ".runs.jsonl") if out.suffix == ".json" else Path(str(out) + ".runs.jsonl")


def parse_sample(stdout: str) -> dict:
    lines = [ln for ln in stdout.splitlines() if ln.startswith(SAMPLE_PREFIX)]
    if len(lines) != 1:
        raise MeasureError(f"expected exactly one {SAMPLE_PREFIX} line, got {len(lines)}")
    try:
        sample = json.loads(lines[0][len(SAMPLE_PREFIX):])
    except json.JSONDecodeError as exc:
        raise MeasureError(f"sample line is not JSON: {exc}") from None
    if not isinstance(sample, dict):
        raise MeasureError("sample line must hold a JSON object")
    latency = sample.get("latency_ms")
    if isinstance(latency, bool) or not isinstance(latency, (int, float)) or not latency > 0:
        raise MeasureError(f"latency_ms must be a positive number, got {latency!r}")
    return sample


def run_once(config: MeasureConfig, variant: str) -> tuple[dict, float]:
    """One fresh process of ``variant``; its own process group is killed on timeout."""
    argv = config.baseline_command if variant == "baseline" else config.instrumented_command
    env = dict(os.environ)
    env.update(config.env)
    env.update(ATREX_TIMELINE_VARIANT=variant, ATREX_TIMELINE_WARMUP=str(config.warmup),
               ATREX_TIMELINE_ITERATIONS=str(config.iterations))
    start = time.monotonic()
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, cwd=config.cwd, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=config.timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise MeasureError(f"{variant} run exceeded {config.timeout:g} s") from None
    except BaseException:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        raise
    if proc.returncode != 0:
        # profilers such as run-iket report on stdout; fall back to it when stderr is empty
        tail = " ".join((err or out or "").split())[-200:]
        raise MeasureError(f"{variant} run exited {proc.returncode}: {tail}")
    return parse_sample(out), time.monotonic() - start


def check_sample(sample: dict, variant: str, config: MeasureConfig, first: dict | None) -> None:
    if sample.get("correctness") != "passed":
        raise MeasureError(f"{variant} run reports correctness {sample.get('correctness')!r}")
    if sample.get("synchronized") is not True:
        raise MeasureError(f"{variant} run was not synchronized")
    if sample.get("warmup") != config.warmup or sample.get("iterations") != config.iterations:
        raise MeasureError(f"{variant} run used warmup/iterations {sample.get('warmup')}/"
                           f"{sample.get('iterations')}, asked {config.warmup}/{config.iterations}")
    workload = sample.get("workload_identity")
    if not isinstance(workload, str) or not workload:
        raise MeasureError(f"{variant} run names no workload_identity")
    if config.workload_identity is not None and workload != config.workload_identity:
        raise MeasureError(f"workload drift: {variant} run measured {workload!r}, "
                           f"expected {config.workload_identity!r}")
    device = sample.get("device_identity")
    if not isinstance(device, dict) or not device.get("uuid"):
        raise MeasureError(f"{variant} run names no device_identity.uuid")
    if first is not None:
        if workload != first["workload_identity"]:
            raise MeasureError(f"workload drift: {workload!r} after {first['workload_identity']!r}")
        if device.get("uuid") != first["device_identity"].get("uuid"):
            raise MeasureError(f"device drift: {device.get('uuid')!r} after {first['device_identity'].get('uuid')!r}")


def _sources(config: MeasureConfig) -> dict[str, str | None]:
    paths = {"baseline_source": config.baseline_source, "instrumented_source": config.instrumented_source,
             "baseline_binary": config.baseline_binary, "instrumented_binary": config.instrumented_binary}
    return {k: (sha256_file(p) if p else None) for k, p in paths.items()}


def overhead_percent(baseline, instrumented) -> float:
    return (float(np.median(instrumented)) / float(np.median(baseline)) - 1.0) * 100.0


def _median_ratio(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (np.median(b, axis=1) / np.median(a, axis=1) - 1.0) * 100.0


def statistics(runs: list[dict], schedule: list[str], target_percent: float) -> dict:
    """Everything the artifact states about the runs; pure, so `validate` can recompute it."""
    base = np.array([r["latency_ms"] for r in runs if r["variant"] == "baseline"], dtype=np.float64)
    inst = np.array([r["latency_ms"] for r in runs if r["variant"] == "instrumented"], dtype=np.float64)
    if base.size == 0 or inst.size == 0:
        raise MeasureError("a measurement needs runs of both variants")
    hl = hodges_lehmann(np.log(base), np.log(inst), CONFIDENCE)

    def pct(v):
        return None if v is None else (float(np.exp(v)) - 1.0) * 100.0

    interval = {"method": hl.method, "confidence": CONFIDENCE, "coverage": hl.coverage,
                "estimate_percent": pct(hl.estimate), "low_percent": pct(hl.low), "high_percent": pct(hl.high)}
    interval["width_percent"] = (None if hl.low is None else interval["high_percent"] - interval["low_percent"])
    per_block = len(schedule[0]) // 2 if schedule else 0
    a_blocks = base.reshape(len(schedule), per_block) if per_block and base.size == len(schedule) * per_block else None
    b_blocks = inst.reshape(len(schedule), per_block) if a_blocks is not None and inst.size == base.size else None
    if b_blocks is not None:
        bs = bootstrap_blocks(a_blocks, b_blocks, _median_ratio, CONFIDENCE)
        boot = {"method": bs.method, "confidence": CONFIDENCE, "estimate_percent": bs.estimate,
                "low_percent": bs.low, "high_percent": bs.high, "resamples": 4000, "seed": 0}
    else:
        boot = None
    test = mann_whitney(np.log(base), np.log(inst))
    overhead = overhead_percent(base, inst)
    high, low = interval["high_percent"], interval["low_percent"]
    if high is not None and high <= target_percent:
        verdict = "within_target"
    elif low is not None and low > target_percent:
        verdict = "above_target"
    else:
        verdict = "inconclusive"
    return {
        "baseline_ms": float(np.median(base)),
        "instrumented_ms": float(np.median(inst)),
        "overhead_percent": overhead,
        "samples": {"baseline": int(base.size), "instrumented": int(inst.size)},
        "interval": interval,
        "bootstrap_interval": boot,
        "rank_test": {**test.to_json(), "alpha": 0.05, "difference_detected": test.p_value < 0.05},
        "target_percent": target_percent,
        "verdict": verdict,
    }


def variant_schedule(patterns: list[str]) -> list[str]:
    """The variant of each run, block after block: the schedule as AKA writes it."""
    return [VARIANT[letter] for pattern in patterns for letter in pattern]


def block_patterns(schedule) -> tuple[list[str] | None, str | None]:
    """(the ABBA/BAAB blocks of a schedule, None) or (None, why not), by AKA's rule: a
    non-empty list naming the variant of each run, complete ABBA/BAAB blocks, equally many of
    each and at least two. A list of block patterns (as episcope once wrote) is refused."""
    letters = {"baseline": "A", "instrumented": "B"}
    if not isinstance(schedule, list) or not schedule or not all(v in letters for v in schedule):
        return None, "measurement schedule is invalid (it must name the variant of each run)"
    if len(schedule) % 4:
        return None, "measurement schedule must contain complete ABBA/BAAB blocks"
    patterns = ["".join(letters[v] for v in schedule[i:i + 4]) for i in range(0, len(schedule), 4)]
    if not all(p in BLOCK_PATTERNS for p in patterns):
        return None, "measurement schedule must use ABBA or BAAB blocks"
    if patterns.count("ABBA") != patterns.count("BAAB"):
        return None, "measurement must contain equally many ABBA and BAAB blocks"
    return patterns, None


def _relative(path: str | None, output: str) -> str | None:
    return None if path is None else os.path.relpath(os.path.abspath(path), os.path.dirname(os.path.abspath(output)))


def measure(config: MeasureConfig) -> dict:
    """Run blocks until the interval is narrow enough; write the artifact and return it."""
    if config.orders is not None:
        if (any(o not in BLOCK_PATTERNS for o in config.orders) or len(config.orders) < 2
                or config.orders.count("ABBA") != config.orders.count("BAAB")):
            raise MeasureError("--order needs equally many ABBA and BAAB blocks, at least one of each")
    elif config.min_blocks < 1 or config.max_blocks < config.min_blocks or config.max_blocks % 2:
        # AKA reads only files with equally many ABBA and BAAB blocks
        raise MeasureError("need 1 <= min_blocks <= max_blocks and an even max_blocks")
    log = runs_log_path(config.output)
    log.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(log, b"")
    hashes = _sources(config)
    runs: list[dict] = []
    schedule: list[str] = []
    first: dict | None = None
    stop_reason = "max_blocks"
    try:
        planned = config.orders or [BLOCK_PATTERNS[block % 2] for block in range(config.max_blocks)]
        for block, pattern in enumerate(planned):
            schedule.append(pattern)
            for letter in pattern:
                variant = VARIANT[letter]
                sample, wall = run_once(config, variant)
                check_sample(sample, variant, config, first)
                first = first or sample
                if _sources(config) != hashes:
                    raise MeasureError("a source or binary changed during the measurement")
                run = {"ordinal": len(runs), "variant": variant, "latency_ms": float(sample["latency_ms"])}
                runs.append(run)
                append_line(log, {"schema": RUN_SCHEMA, "event": "run", "block": block, **run,
                                  "wall_seconds": round(wall, 6), "workload_identity": sample["workload_identity"],
                                  "device_uuid": sample["device_identity"]["uuid"], "at": time.time()})
            stats = statistics(runs, schedule, config.target_percent)
            interval = stats["interval"]
            append_line(log, {"schema": RUN_SCHEMA, "event": "block", "block": block, "pattern": pattern,
                              "baseline_ms": stats["baseline_ms"], "instrumented_ms": stats["instrumented_ms"],
                              "overhead_percent": stats["overhead_percent"],
                              "interval_low_percent": interval["low_percent"],
                              "interval_high_percent": interval["high_percent"],
                              "p_value": stats["rank_test"]["p_value"], "verdict": stats["verdict"],
                              "at": time.time()})
            width = interval["width_percent"]
            # stop early only after a whole ABBA+BAAB pair, so the blocks stay balanced
            if (config.orders is None and config.ci_width is not None and block + 1 >= config.min_blocks
                    and (block + 1) % 2 == 0 and width is not None and width <= config.ci_width):
                stop_reason = "ci_width"
                break
    except MeasureError as exc:
        append_line(log, {"schema": RUN_SCHEMA, "event": "rejected", "reason": str(exc), "at": time.time()})
        raise
    artifact = {
        "schema": MEASUREMENT_SCHEMA,
        "schedule": variant_schedule(schedule),
        "runs": runs,
        "warmup": config.warmup,
        "iterations": config.iterations,
        "synchronized": True,
        "workload_identity": first["workload_identity"],
        "device_identity": first["device_identity"],
        "variants": {
            "baseline": {"command": config.baseline_command, "source": _relative(config.baseline_source, config.output),
                         "source_sha256": hashes["baseline_source"],
                         "binary": _relative(config.baseline_binary, config.output),
                         "binary_sha256": hashes["baseline_binary"]},
            "instrumented": {"command": config.instrumented_command,
                             "source": _relative(config.instrumented_source, config.output),
                             "source_sha256": hashes["instrumented_source"],
                             "binary": _relative(config.instrumented_binary, config.output),
                             "binary_sha256": hashes["instrumented_binary"]},
        },
        "aggregation": AGGREGATION,
        "block_patterns": schedule,
        "blocks": len(schedule),
        "stop_reason": stop_reason,
        "ci_width_requested": config.ci_width,
        "max_blocks": config.max_blocks,
        "runs_log": log.name,
        **statistics(runs, schedule, config.target_percent),
    }
    atomic_write_bytes(config.output, json_bytes(artifact))
    append_line(log, {"schema": RUN_SCHEMA, "event": "done", "overhead_percent": artifact["overhead_percent"],
                      "verdict": artifact["verdict"], "at": time.time()})
    return artifact


def verify_measurement(obj: dict) -> list[str]:
    """Reasons a measurement artifact does not hold up (empty when it does)."""
    reasons: list[str] = []
    if not isinstance(obj, dict) or obj.get("schema") != MEASUREMENT_SCHEMA:
        return ["measurement schema is not " + MEASUREMENT_SCHEMA]
    patterns, why = block_patterns(obj.get("schedule"))
    if patterns is None:
        return [why]
    schedule = obj["schedule"]
    runs = obj.get("runs")
    if not isinstance(runs, list) or len(runs) != len(schedule):
        return ["measurement runs do not match schedule"]
    for index, (variant, run) in enumerate(zip(schedule, runs)):
        if not isinstance(run, dict):
            return [f"measurement run {index} must be an object"]
        if run.get("ordinal") != index or type(run.get("ordinal")) is not int:
            return [f"measurement run {index} has an invalid ordinal"]
        if run.get("variant") != variant:
            return [f"measurement run {index} does not match schedule"]
        latency = run.get("latency_ms")
        if isinstance(latency, bool) or not isinstance(latency, (int, float)) or not math.isfinite(latency) \
                or latency <= 0:
            return [f"measurement run {index} latency_ms is not a finite positive number"]
    if obj.get("aggregation") != AGGREGATION:
        reasons.append("measurement aggregation is not median-based")
    try:
        stats = statistics(runs, patterns, float(obj.get("target_percent", 10.0)))
    except (MeasureError, TypeError, ValueError, KeyError) as exc:
        return [f"measurement statistics cannot be recomputed: {exc}"]
    # Statistics the file states must be its runs'; AKA's own files state none.
    for key, value in stats.items():
        if key in obj and obj[key] != value:
            reasons.append(f"measurement {key} differs from its runs")
    return reasons


def verify_measured_files(obj: dict, path: str | os.PathLike) -> list[str]:
    """What AKA also requires of a measurement file beyond its runs: the run settings, the
    workload and device it names, and each variant's source (and binary, when named) present
    beside it with the stated SHA-256. ``path`` is the file, which the variants are relative to."""
    reasons = []
    for key, low in (("warmup", 0), ("iterations", 1)):
        value = obj.get(key)
        if type(value) is not int or value < low:
            reasons.append(f"measurement {key} is not an integer >= {low}")
    if obj.get("synchronized") is not True:
        reasons.append("measurement is not device synchronized")
    workload = obj.get("workload_identity")
    if not isinstance(workload, str) or not workload.strip():
        reasons.append("measurement names no workload_identity")
    if not isinstance(obj.get("device_identity"), dict) or not obj["device_identity"]:
        reasons.append("measurement names no device_identity")
    variants = obj.get("variants")
    base = Path(path).parent
    for name in ("baseline", "instrumented"):
        given = variants.get(name) if isinstance(variants, dict) else None
        if not isinstance(given, dict):
            reasons.append(f"measurement names no {name} variant")
            continue
        for artifact in ("source", "binary"):
            rel, digest = given.get(artifact), given.get(f"{artifact}_sha256")
            if artifact == "binary" and rel is None and digest is None:
                continue
            if not isinstance(rel, str) or not rel or not isinstance(digest, str) or len(digest) != 64:
                reasons.append(f"measurement {name} {artifact} or its sha256 is missing")
                continue
            file = base / rel
            if not file.is_file():
                reasons.append(f"measurement {name} {artifact} is missing: {rel}")
            elif sha256_file(file) != digest:
                reasons.append(f"measurement {name} {artifact} sha256 mismatch: {rel}")
    return reasons
