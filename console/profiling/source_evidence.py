"""Line-level evidence from a --source profile (FORMATS §9 analysis files).

Input: the CSV of `ncu --import ncu_source.ncu-rep --page source --csv --print-source sass`
(one row per SASS instruction) and, where the kernel carries line info, `--print-source cuda`
(one row per CUDA source line). Output, under analysis/: warp_stalls_line_run.{json,txt}
(where warps stall), source_metrics_line_run.{json,txt} (memory counters per line),
disasm_run.{json,txt} (the SASS with its counters) and source_evidence_manifest.json.
Columns are found by name, so a newer ncu with more columns still reads.
"""

from __future__ import annotations

import csv
import io
import json
import os

from console.formats.plainjson import atomic_write_bytes

from .ncu_csv import parse_number

SCHEMA = "v1"
TOP_ROWS = 40
DISASM_ROWS = 4000
EVIDENCE = (
    ("warp_stalls_line_run", "where warps stall: stall samples per source line (SASS address when no line info)"),
    ("source_metrics_line_run", "memory counters per source line: excess sectors, shared/global/local traffic"),
    ("disasm_run", "SASS listing with executed instructions and stall samples per instruction"),
)
_MEMORY_WORDS = ("sector", "l1", "l2", "memory", "shared", "global", "local", "bank", "excessive", "dram", "wavefront")


def read_source_table(text: str) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows of a source page; banner lines and repeated headers are skipped."""
    rows = list(csv.reader(io.StringIO(text)))
    header: list[str] | None = None
    body: list[dict[str, str]] = []
    for row in rows:
        cells = [c.strip() for c in row]
        if header is None:
            if len(cells) >= 3 and "Source" in cells:
                header = cells
            continue
        if cells == header or len(cells) < 2:
            continue
        body.append(dict(zip(header, cells)))
    if header is None:
        raise ValueError("no source table (a header row with a 'Source' column) found")
    return header, body


def _pick(header, *names):
    for n in names:
        if n in header:
            return n
    return None


def _columns(header: list[str]) -> dict:
    where = _pick(header, "# Address", "Address", "Line", "#", "Line Number", "# Line")
    samples = next((h for h in header if h.lower().startswith("warp stall sampling (all")), None) \
        or next((h for h in header if "sampling" in h.lower()), None)
    not_issued = next((h for h in header if "not-issued" in h.lower() or "not issued" in h.lower()), None)
    stalls = [h for h in header if "stall" in h.lower() and h not in (samples, not_issued) and "sampling" not in h.lower()]
    executed = _pick(header, "Instructions Executed", "Warp Instructions Executed")
    numeric_skip = {where, "Source", samples, not_issued, executed, *stalls}
    memory = [h for h in header if h not in numeric_skip and any(w in h.lower() for w in _MEMORY_WORDS)]
    return {"where": where, "samples": samples, "not_issued": not_issued, "stalls": stalls,
            "executed": executed, "memory": memory}


def _num(row, col):
    return parse_number(row.get(col)) if col else None


def _row_record(row, cols, extra: list[str]) -> dict:
    rec = {"where": row.get(cols["where"]) if cols["where"] else None,
           "source": row.get("Source"),
           "samples": _num(row, cols["samples"]),
           "not_issued_samples": _num(row, cols["not_issued"]),
           "executed": _num(row, cols["executed"])}
    values = {c: _num(row, c) for c in extra}
    rec["counters"] = {c: v for c, v in values.items() if v}
    return rec


def _table(records: list[dict], title: str, counter_names: list[str]) -> str:
    """Plain-text rendering: one row per line/instruction, counters as name=value."""
    lines = [title, f"{'where':>10}  {'samples':>8}  {'executed':>12}  source  |  counters"]
    for r in records:
        samples = "" if r["samples"] is None else f"{r['samples']:.0f}"
        executed = "" if r["executed"] is None else f"{r['executed']:.0f}"
        counters = ", ".join(f"{k}={v:g}" for k, v in r["counters"].items() if k in counter_names)
        src = (r["source"] or "").replace("\t", " ")
        lines.append(f"{str(r['where'] or ''):>10}  {samples:>8}  {executed:>12}  {src}  |  {counters}")
    return "\n".join(lines) + "\n"


def _write(outdir: str, stem: str, doc: dict, text: str) -> None:
    for ext, data in (("json", json.dumps(doc, indent=1, sort_keys=True) + "\n"), ("txt", text)):
        atomic_write_bytes(os.path.join(outdir, "analysis", f"{stem}.{ext}"), data.encode())


def _load(path: str | None):
    """(header, rows, status, error) for one exported source page."""
    if not path or not os.path.isfile(path) or os.path.getsize(path) == 0:
        return None, None, "missing", None
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            header, rows = read_source_table(f.read())
    except (OSError, ValueError) as exc:
        return None, None, "error", " ".join(str(exc).split())
    return header, rows, ("ok" if rows else "missing"), None


def build(outdir: str, sass_csv: str | None, cuda_csv: str | None, requested: bool = True) -> dict:
    """Write the analysis files and the manifest; return the manifest."""
    entries = {name: {"name": name, "json": f"analysis/{name}.json", "txt": f"analysis/{name}.txt",
                      "purpose": purpose, "status": "skipped"} for name, purpose in EVIDENCE}
    if requested:
        sass = _load(sass_csv)
        cuda = _load(cuda_csv)
        # Line-level views prefer CUDA source lines; without line info they fall back to SASS.
        line_view, line = ("cuda", cuda) if cuda[2] == "ok" else ("sass", sass)
        for name, view, (header, rows, status, error) in (
            ("warp_stalls_line_run", line_view, line),
            ("source_metrics_line_run", line_view, line),
            ("disasm_run", "sass", sass),
        ):
            entry = entries[name]
            entry["status"] = status
            entry["view"] = view
            if error:
                entry["error"] = error
            if status != "ok":
                continue
            cols = _columns(header)
            doc = {"schema": SCHEMA, "view": view, "columns": cols}
            if name == "warp_stalls_line_run":
                recs = [_row_record(r, cols, cols["stalls"]) for r in rows]
                total = sum(r["samples"] or 0 for r in recs)
                hot = sorted((r for r in recs if r["samples"]), key=lambda r: -r["samples"])[:TOP_ROWS]
                for r in hot:
                    r["pct_of_samples"] = round(100.0 * r["samples"] / total, 2) if total else None
                doc.update(total_samples=total, rows=hot)
                text = _table(hot, f"Warp stall samples per {'source line' if view == 'cuda' else 'SASS instruction'} "
                                   f"(top {len(hot)}, {total:.0f} samples)", cols["stalls"])
            elif name == "source_metrics_line_run":
                recs = [_row_record(r, cols, cols["memory"]) for r in rows]
                hot = [r for r in recs if r["counters"]]
                hot.sort(key=lambda r: -sum(r["counters"].values()))
                hot = hot[:TOP_ROWS]
                doc.update(rows=hot)
                text = _table(hot, f"Memory counters per {'source line' if view == 'cuda' else 'SASS instruction'} "
                                   f"(top {len(hot)} by traffic)", cols["memory"])
            else:
                recs = [_row_record(r, cols, cols["memory"] + cols["stalls"]) for r in rows[:DISASM_ROWS]]
                doc.update(rows=recs, truncated=len(rows) > DISASM_ROWS, instructions=len(rows))
                text = _table(recs, f"SASS ({len(rows)} instructions)", cols["memory"])
            try:
                _write(outdir, name, doc, text)
            except OSError as exc:
                entry["status"] = "error"
                entry["error"] = " ".join(str(exc).split())
    manifest = {"schema": SCHEMA, "evidence": list(entries.values())}
    atomic_write_bytes(os.path.join(outdir, "analysis", "source_evidence_manifest.json"),
                       (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())
    return manifest
