"""Assemble a profile directory from ncu's CSV pages (FORMATS §9).

`python3 -m console.profiling.funnel --output-dir DIR --level survey|sol|deep ...` reads
DIR/analysis/ncu_raw.csv (and ncu_details.csv, the source pages with --source) and writes
gateway_profile.json (PROFILE_JSON), summary.txt and analysis/metrics_key_run.json.
tools/profile_nvidia.sh calls it after ncu; it also re-runs on kept CSVs without a GPU.

metrics_key_run.json is in AKA's layout, which AKA's classify_ncu.py reads: one flat object
``{ncu metric name: value, ..., "__kernel_name__": name}`` for the kernel the summary is
about (every metric ncu reported for it, medians over its launches). episcope's own
per-kernel view sits under ``"episcope"``, a key AKA's reader ignores.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time

from console.formats import profile_summary_text
from console.formats.plainjson import atomic_write_bytes
from console.formats.profile_record import bare_profile

from . import diagnosis, source_evidence
from .metric_names import KEY_METRICS, TENSOR_PATTERN
from .ncu_csv import Launch, NcuCsvError, parse_details_page, parse_raw_page

LEVELS = ("survey", "sol", "deep")
DEFAULT_TOP = 10


def key_metrics(launch: Launch) -> dict[str, float | None]:
    """The logical key metrics of one launch; a key no candidate carries is None."""
    out: dict[str, float | None] = {}
    for key, candidates in KEY_METRICS.items():
        out[key] = next((v for v in (launch.number(c) for c in candidates) if v is not None), None)
    tensor = [v for name, v in launch.values.items() if isinstance(v, float) and TENSOR_PATTERN.match(name)]
    out["tensor_pct"] = max(tensor) if tensor else None
    if out["grid_size"] is None and launch.grid:
        out["grid_size"] = float(launch.grid[0] * launch.grid[1] * launch.grid[2])
    if out["block_size"] is None and launch.block:
        out["block_size"] = float(launch.block[0] * launch.block[1] * launch.block[2])
    return out


def _median(values):
    known = [v for v in values if v is not None]
    return statistics.median(known) if known else None


def _r(v, digits=2):
    return None if v is None else round(v, digits)


def group_kernels(launches: list[Launch], details: list[Launch]) -> list[dict]:
    """One entry per kernel name: median key metrics over its profiled launches."""
    rules_by_id = {d.id: d.rules for d in details}
    groups: dict[str, list[Launch]] = {}
    for launch in launches:
        groups.setdefault(launch.kernel, []).append(launch)
    kernels = []
    for name, group in groups.items():
        per_launch = [key_metrics(launch) for launch in group]
        keys = per_launch[0].keys()
        m = {k: _median(p[k] for p in per_launch) for k in keys}
        total = sum(p["duration_ns"] for p in per_launch if p["duration_ns"] is not None) if any(
            p["duration_ns"] is not None for p in per_launch) else None
        rules = []
        for launch in group:
            for r in rules_by_id.get(launch.id, ()):
                if r not in rules:
                    rules.append(r)
        kernels.append({"name": name, "launches": len(group), "ids": [launch.id for launch in group],
                        "total_duration_ns": total, "key": m, "ncu_rules": rules, "raw": _raw_metrics(group)})
    return kernels


def _raw_metrics(group: list[Launch]) -> dict[str, float | str]:
    """Every metric ncu reported for one kernel, by its ncu name: the median over the launches
    of a number, the first launch's text of a string."""
    out: dict[str, float | str] = {}
    for name in group[0].values:
        values = [launch.values.get(name) for launch in group]
        numbers = [v for v in values if isinstance(v, float)]
        if numbers:
            out[name] = statistics.median(numbers)
        elif isinstance(values[0], str) and values[0]:
            out[name] = values[0]
    return out


def kernel_entry(k: dict, level: str) -> dict:
    """The PROFILE_JSON entry of one grouped kernel."""
    m = k["key"]
    comp, mem = m.get("compute_sol_pct"), m.get("mem_sol_pct")
    bound = None if comp is None or mem is None else ("compute" if comp >= mem else "memory")
    patterns = diagnosis.diagnose(m) if level != "survey" else []
    metrics = {key: _r(v, 4) for key, v in m.items() if v is not None}
    metrics["launches"] = k["launches"]
    if k["total_duration_ns"] is not None:
        metrics["total_duration_ns"] = _r(k["total_duration_ns"], 1)
    return {
        "name": k["name"],
        "duration": _r(m.get("duration_ns"), 1),
        "duration_unit": "ns",
        "compute_sol_pct": _r(comp),
        "mem_sol_pct": _r(mem),
        "dram_pct": _r(m.get("dram_pct")),
        "occupancy_pct": _r(m.get("occupancy_pct")),
        "bound": bound,
        "diagnostics": [p.to_json() for p in patterns],
        "metrics": metrics,
    }


def file_sha256(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return hashlib.file_digest(f, "sha256").hexdigest()
    except OSError:
        return None


def _queries(level: str, program: str, outdir: str, kernel: str | None, has_source: bool, localize: list[str]) -> list[str]:
    base = f"tools/profile_nvidia.sh {program}"
    if kernel is None:
        return [f"no kernel was profiled: check the kernel filter, then PROFILE_LEVEL=survey {base} --output-dir {outdir}"]
    regex = "'^" + kernel + "$'"
    out = []
    if level == "survey":
        out.append(f"PROFILE_LEVEL=sol {base} --output-dir {outdir}-sol")
    if level in ("survey", "sol"):
        out.append(f"PROFILE_LEVEL=deep PROFILE_KERNEL_REGEX={regex} {base} --output-dir {outdir}-deep --source")
    elif not has_source:
        out.append(f"PROFILE_LEVEL=deep PROFILE_KERNEL_REGEX={regex} {base} --output-dir {outdir} --source")
    for rel in localize:
        if not rel.startswith(diagnosis.DEEP_SOURCE_HINT):
            out.append(f"head -n 25 {os.path.join(outdir, rel)}")
    # ncu's own rule findings, from the exported details page: the .ncu-rep itself stays on
    # the GPU machine unless the sandbox is asked for it (--include-raw-profile)
    out.append(f"grep -E '\"(OPT|WRN)\"' {os.path.join(outdir, 'analysis', 'ncu_details.csv')}")
    return out


def _write_text(path: str, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def _write_json(path: str, obj) -> None:
    _write_text(path, json.dumps(obj, indent=1, sort_keys=True) + "\n")


def diff_profiles(current: dict, previous: dict) -> dict:
    """Per-kernel change against an earlier PROFILE_JSON (matched by kernel name)."""
    prev = {k.get("name"): k for k in previous.get("kernels") or [] if isinstance(k, dict)}
    rows = []
    for k in current.get("kernels") or []:
        p = prev.get(k["name"])
        row = {"name": k["name"], "duration_now": k.get("duration"), "duration_before": None, "speedup": None,
               "patterns_gone": [], "patterns_new": []}
        if p is not None:
            before = p.get("duration")
            row["duration_before"] = before
            if isinstance(before, (int, float)) and k.get("duration"):
                row["speedup"] = round(before / k["duration"], 4)
            for key in ("compute_sol_pct", "mem_sol_pct", "dram_pct", "occupancy_pct"):
                a, b = p.get(key), k.get(key)
                row[f"{key}_delta"] = round(b - a, 2) if isinstance(a, (int, float)) and isinstance(b, (int, float)) else None
            ids_before = {d.get("id") for d in p.get("diagnostics") or [] if isinstance(d, dict)}
            ids_now = {d["id"] for d in k.get("diagnostics") or []}
            row["patterns_gone"] = sorted(ids_before - ids_now)
            row["patterns_new"] = sorted(ids_now - ids_before)
        rows.append(row)
    return {"kernels": rows, "only_before": sorted(set(prev) - {k["name"] for k in current.get("kernels") or []})}


def _diff_text(diff: dict, against: str) -> str:
    lines = [f"Diff against {against}", f"{'kernel':<40} {'before us':>10} {'now us':>10} {'speedup':>8}  patterns"]
    for r in diff["kernels"]:
        b = "n/a" if r["duration_before"] is None else f"{r['duration_before'] / 1000:.2f}"
        n = "n/a" if r["duration_now"] is None else f"{r['duration_now'] / 1000:.2f}"
        s = "n/a" if r["speedup"] is None else f"{r['speedup']:.3f}x"
        pats = " ".join([f"-{i}" for i in r["patterns_gone"]] + [f"+{i}" for i in r["patterns_new"]])
        lines.append(f"{r['name'][:40]:<40} {b:>10} {n:>10} {s:>8}  {pats}")
    for name in diff["only_before"]:
        lines.append(f"{name[:40]:<40} (only in the earlier profile)")
    return "\n".join(lines) + "\n"


def assemble(outdir: str, level: str, program: str = "profile_driver.py", top: int | None = None,
             source: bool = False, diff_dir: str | None = None, kernel_file: str = "kernel.py",
             kernel_filter: str | None = None) -> dict:
    """Read the exported pages under ``outdir`` and write every funnel output; return PROFILE_JSON."""
    if level not in LEVELS:
        raise ValueError(f"level must be one of {', '.join(LEVELS)}, got {level!r}")
    analysis = os.path.join(outdir, "analysis")
    os.makedirs(analysis, exist_ok=True)
    with open(os.path.join(analysis, "ncu_raw.csv"), encoding="utf-8", errors="replace") as f:
        raw_text = f.read()
    launches = parse_raw_page(raw_text) if raw_text.strip() else []
    details: list[Launch] = []
    details_path = os.path.join(analysis, "ncu_details.csv")
    notes = []
    if os.path.isfile(details_path):
        try:
            with open(details_path, encoding="utf-8", errors="replace") as f:
                details = parse_details_page(f.read())
        except NcuCsvError as exc:
            notes.append(f"details page unreadable: {exc}")
    grouped = group_kernels(launches, details)
    entries = [kernel_entry(k, level) for k in grouped]
    entries.sort(key=lambda e: -(e["duration"] or 0.0))
    totals = {k["name"]: k["total_duration_ns"] for k in grouped}
    limit = DEFAULT_TOP if top is None else top
    kept, omitted = entries[:limit], max(0, len(entries) - limit)
    known_totals = [t for t in totals.values() if t is not None]
    dominant = max(totals, key=lambda n: totals[n] or 0.0) if known_totals else (entries[0]["name"] if entries else None)
    if not entries:
        notes.append("no kernel was profiled" + (f" (filter {kernel_filter!r} matched none)" if kernel_filter else ""))
    sha = file_sha256(kernel_file)
    doc = {
        "profiler": "ncu",
        "level": level,
        "kernels": kept,
        "kernel_count": len(entries),
        "total_duration_us": round(sum(known_totals) / 1000.0, 3) if known_totals else None,
        "dominant_kernel": dominant,
        "kernels_omitted": omitted,
        "kernel_sha256": sha,
        "kernel_file": kernel_file if sha else None,
        "program": program,
        "source": bool(source),
        "created_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if notes:
        doc["note"] = "; ".join(notes)

    focus_raw = next((k["raw"] for k in grouped if k["name"] == dominant), {})
    _write_json(os.path.join(analysis, "metrics_key_run.json"), {
        **focus_raw,
        "__kernel_name__": dominant,
        "episcope": {
            "schema": "v2", "level": level,
            "kernels": [{"name": k["name"], "launches": k["launches"], "ids": k["ids"], "key_metrics": k["key"],
                         "total_duration_ns": k["total_duration_ns"], "ncu_rules": k["ncu_rules"]} for k in grouped],
        },
    })
    if source:
        source_evidence.build(outdir, os.path.join(analysis, "source_sass.csv"), os.path.join(analysis, "source_cuda.csv"))

    focus = next((e for e in entries if e["name"] == dominant), entries[0] if entries else None)
    patterns = focus["diagnostics"] if focus else []
    symptoms = diagnosis.symptoms_of([p["id"] for p in patterns])
    where = diagnosis.localize(symptoms, outdir, level)
    stalls = diagnosis.top_stalls(focus["metrics"]) if focus else []
    doc["symptoms"] = symptoms
    doc["localize"] = where
    if diff_dir:
        prev_path = os.path.join(diff_dir, "gateway_profile.json")
        try:
            with open(prev_path, encoding="utf-8") as f:
                previous = json.load(f)
        except (OSError, ValueError) as exc:
            doc["note"] = "; ".join(filter(None, [doc.get("note"), f"--diff: cannot read {prev_path}: {exc}"]))
        else:
            previous = bare_profile(previous)  # a synced copy is the sandbox's job record
            diff = diff_profiles(doc, previous if isinstance(previous, dict) else {})
            diff["against"] = diff_dir
            doc["diff"] = diff
            _write_json(os.path.join(analysis, "diff_run.json"), diff)
            _write_text(os.path.join(analysis, "diff_run.txt"), _diff_text(diff, diff_dir))
    queries = _queries(level, program, outdir, focus["name"] if focus else None, source, where)
    _write_text(os.path.join(outdir, "summary.txt"), profile_summary_text.render(focus, patterns, symptoms, where, stalls, queries))
    _write_json(os.path.join(outdir, "gateway_profile.json"), doc)
    return doc


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python3 -m console.profiling.funnel", description=__doc__.splitlines()[0])
    p.add_argument("--output-dir", required=True)
    p.add_argument("--level", choices=LEVELS, default="sol")
    p.add_argument("--program", default="profile_driver.py")
    p.add_argument("--top", type=int)
    p.add_argument("--source", action="store_true")
    p.add_argument("--diff")
    p.add_argument("--kernel-file", default="kernel.py", help="file whose sha256 the profile records")
    p.add_argument("--kernel-regex")
    p.add_argument("--kernel-name")
    args = p.parse_args(argv)
    try:
        doc = assemble(args.output_dir, args.level, args.program, args.top, args.source, args.diff,
                       args.kernel_file, args.kernel_name or args.kernel_regex)
    except (OSError, NcuCsvError, ValueError) as exc:
        print(f"profile funnel: {' '.join(str(exc).split())}", file=sys.stderr)
        return 1
    with open(os.path.join(args.output_dir, "summary.txt"), encoding="utf-8") as f:
        sys.stdout.write(f.read())
    print(f"[profile_nvidia] wrote {os.path.join(args.output_dir, 'gateway_profile.json')}")
    if not doc["kernels"]:
        print(f"profile funnel: {doc.get('note', 'no kernel was profiled')}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
