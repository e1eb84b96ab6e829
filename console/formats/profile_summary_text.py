"""summary.txt of a profile directory (FORMATS §9): render it, and parse it back.

The parser is lenient: it reads what it recognises and leaves the rest None, so it also
reads summaries written by other generations of the tool. Standard library only: the profile
funnel writes summary.txt on the GPU machine.
"""

from __future__ import annotations

import re
from typing import Any

HEADER = "===== NCU Profile Summary ====="
DIAGNOSIS = "===== Diagnosis ====="
QUERIES = "===== Suggested Queries ====="
NO_PATTERNS = "No significant patterns detected."


def _num(v: float | None, digits: int = 1, unit: str = "") -> str:
    if v is None:
        return "n/a"
    return f"{v:,.{digits}f}{unit}"


def render(kernel: dict[str, Any] | None, patterns: list[dict[str, Any]], symptoms: list[str], localize: list[str],
           stalls: list[tuple[str, float]], queries: list[str]) -> str:
    """The summary text for one kernel (its PROFILE_JSON entry plus key metrics)."""
    k = kernel or {}
    m = k.get("metrics") or {}
    dur = k.get("duration")
    grid = m.get("grid_size")
    block = m.get("block_size")
    ld, st = m.get("local_ld_bytes"), m.get("local_st_bytes")
    lines = [
        HEADER,
        f"Kernel: {k.get('name') or 'n/a'}",
        f"Duration: {_num(None if dur is None else dur / 1000.0, 2)} us",
        f"Grid: {_num(grid, 0)} blocks x {_num(block, 0)} threads",
        f"SM Throughput: {_num(k.get('compute_sol_pct'), 1, '%')}",
        f"Memory Throughput: {_num(k.get('mem_sol_pct'), 1, '%')}",
        f"L2 Hit Rate: {_num(m.get('l2_hit_pct'), 1, '%')}",
        f"Achieved Occupancy: {_num(k.get('occupancy_pct'), 1, '%')}",
        f"Tensor Core Utilization: {_num(m.get('tensor_pct'), 1, '%')}",
        f"FP64 Pipe Utilization: {_num(m.get('fp64_pipe_pct'), 1, '%')}",
        f"Registers/Thread: {_num(m.get('registers_per_thread'), 0)}",
        f"Local Ld/St: {_num(ld, 0)} / {_num(st, 0)} bytes",
        "Top Stall Reasons:",
    ]
    lines += [f"  {reason}: {value:.2f}" for reason, value in stalls] or ["  n/a"]
    lines.append(DIAGNOSIS)
    if patterns:
        lines.append(f"Detected {len(patterns)} pattern(s):")
        for p in patterns:
            lines.append(f"  Pattern {p['id']} [{p['severity']}]: {p['label']}")
            for ev in p.get("evidence") or ():
                lines.append(f"    Evidence: {ev}")
    else:
        lines.append(NO_PATTERNS)
    lines.append(f"SYMPTOMS: {', '.join(symptoms) if symptoms else 'none'}")
    lines.append(f"LOCALIZE: {', '.join(localize) if localize else 'none'}")
    lines.append(QUERIES)
    lines += [f"- {q}" for q in queries]
    return "\n".join(lines) + "\n"


_PATTERN = re.compile(r"^\s*Pattern\s+(\S+)\s+\[(\w+)\]\s*:\s*(.*?)\s*$")
_STALL = re.compile(r"^\s*(\w+)\s*:\s*([-+0-9.,eE]+)\s*$")
_FIELD = re.compile(r"^([A-Za-z0-9 /.]+?):\s*(.*?)\s*$")


def _first_number(text: str | None) -> float | None:
    if not text:
        return None
    m = re.search(r"[-+]?\d[\d,]*(?:\.\d+)?(?:[eE][-+]?\d+)?", text)
    return float(m.group(0).replace(",", "")) if m else None


def _listing(text: str) -> list[str]:
    text = text.strip()
    if not text or text.lower() in ("none", "n/a"):
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def parse(text: str) -> dict[str, Any]:
    """Fields of a summary.txt: kernel, duration_us, fields{}, stalls[(reason, value)],
    patterns[(id, severity, label, evidence)], symptoms[], localize[], queries[]."""
    out: dict[str, Any] = {"kernel": None, "duration_us": None, "fields": {}, "stalls": [], "patterns": [],
                 "symptoms": [], "localize": [], "queries": [], "no_patterns": False}
    section = None
    in_stalls = False
    current: list[Any] | None = None
    for raw in text.splitlines():
        line = raw.rstrip()
        if not line.strip():
            continue
        if line.strip() == HEADER:
            section, in_stalls = "summary", False
            continue
        if line.strip() == DIAGNOSIS:
            section, in_stalls = "diagnosis", False
            continue
        if line.strip() == QUERIES:
            section = "queries"
            continue
        if section == "summary":
            if in_stalls:
                m = _STALL.match(line)
                if m and raw.startswith((" ", "\t")):
                    out["stalls"].append((m.group(1), float(m.group(2).replace(",", ""))))
                    continue
                if raw.startswith((" ", "\t")):
                    continue
                in_stalls = False
            m = _FIELD.match(line)
            if not m:
                continue
            key, value = m.group(1).strip(), m.group(2)
            if key == "Top Stall Reasons":
                in_stalls = True
                continue
            out["fields"][key] = value
            if key == "Kernel":
                out["kernel"] = None if value in ("", "n/a") else value
            elif key == "Duration":
                out["duration_us"] = _first_number(value)
        elif section == "diagnosis":
            m = _PATTERN.match(line)
            if m:
                current = [m.group(1), m.group(2).lower(), m.group(3), []]
                out["patterns"].append(current)
                continue
            if line.strip().startswith("Evidence:") and current is not None:
                current[3].append(line.strip().removeprefix("Evidence:").strip())
                continue
            if line.startswith("SYMPTOMS:"):
                out["symptoms"] = _listing(line.split(":", 1)[1])
            elif line.startswith("LOCALIZE:"):
                out["localize"] = _listing(line.split(":", 1)[1])
            elif line.strip() == NO_PATTERNS:
                out["no_patterns"] = True
        elif section == "queries":
            out["queries"].append(line.strip().removeprefix("- "))
    out["patterns"] = [(p[0], p[1], p[2], tuple(p[3])) for p in out["patterns"]]
    return out
