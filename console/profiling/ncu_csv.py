"""Parse the CSV that `ncu --import REPORT --csv --page raw|details|source` prints.

ncu quotes every field, prints a units row under the raw page's header, writes numbers with
thousands separators ("1,234,567") and "n/a" where a metric has no value, and may put its
own `==PROF==`/`==WARNING==` lines before the table. Nothing here guesses a value: a cell
that is not a number stays text, and an empty or "n/a" cell is None.
"""

from __future__ import annotations

import csv
import io
import re
from dataclasses import dataclass, field

# Scale to the unit the funnel reports in: time in ns, sizes in bytes.
_UNIT_SCALE = {
    "nsecond": ("ns", 1.0),
    "ns": ("ns", 1.0),
    "usecond": ("ns", 1e3),
    "us": ("ns", 1e3),
    "msecond": ("ns", 1e6),
    "ms": ("ns", 1e6),
    "second": ("ns", 1e9),
    "byte": ("byte", 1.0),
    "kbyte": ("byte", 1e3),
    "mbyte": ("byte", 1e6),
    "gbyte": ("byte", 1e9),
    "kibyte": ("byte", 1024.0),
    "mibyte": ("byte", 1024.0**2),
    "gibyte": ("byte", 1024.0**3),
}
_MISSING = {"", "n/a", "N/A", "na", "-", "--", "nan", "NaN"}
_NUMBER = re.compile(r"^[+-]?(\d{1,3}(,\d{3})+|\d+)?(\.\d+)?([eE][+-]?\d+)?$")
_TUPLE = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")


class NcuCsvError(ValueError):
    """The text is not an ncu CSV page (one-line message)."""


def parse_number(text: str | None) -> float | None:
    """A number as ncu prints it, or None for empty/"n/a"/text cells."""
    if text is None:
        return None
    s = text.strip().rstrip("%").strip()
    if s in _MISSING:
        return None
    if not _NUMBER.match(s) or s in ("+", "-", "."):
        return None
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def parse_dim3(text: str | None) -> tuple[int, int, int] | None:
    """"(256, 1, 1)" -> (256, 1, 1)."""
    if not text:
        return None
    m = _TUPLE.match(text.strip())
    return tuple(int(g) for g in m.groups()) if m else None  # type: ignore[return-value]


def scale_value(value: float | None, unit: str | None) -> tuple[float | None, str | None]:
    """Convert a value to ns or bytes where its unit is a time or size; keep others."""
    if value is None or not unit:
        return value, unit
    known = _UNIT_SCALE.get(unit.strip().lower())
    if known is None:
        return value, unit
    return value * known[1], known[0]


def read_rows(text: str, first_header: tuple[str, ...]) -> tuple[list[str], list[list[str]]]:
    """Split CSV text into (header, rows), skipping ncu's chatter before the header.

    The header is the first row whose first cell is one of ``first_header``.
    """
    rows = list(csv.reader(io.StringIO(text)))
    for i, row in enumerate(rows):
        if row and row[0].strip().lstrip("\ufeff") in first_header:
            header = [h.strip().lstrip("\ufeff") for h in row]
            body = [r for r in rows[i + 1 :] if r and any(c.strip() for c in r)]
            return header, body
    raise NcuCsvError(f"no CSV header starting with {' or '.join(first_header)!r} found")


@dataclass(slots=True)
class Launch:
    """One profiled kernel launch (one row of the raw page, or one ID of the details page)."""

    id: str
    kernel: str
    block: tuple[int, int, int] | None = None
    grid: tuple[int, int, int] | None = None
    device: str | None = None
    values: dict[str, float | str | None] = field(default_factory=dict)
    units: dict[str, str] = field(default_factory=dict)
    rules: list[dict] = field(default_factory=list)

    def number(self, name: str) -> float | None:
        v = self.values.get(name)
        return v if isinstance(v, float) else None


# Columns that describe the launch, not metrics (raw and details pages share them).
_IDENTITY = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
             "Block Size", "Grid Size", "Device", "CC", "Device Name")


def parse_raw_page(text: str) -> list[Launch]:
    """`--page raw`: one row per launch, one column per metric, a units row under the header."""
    header, body = read_rows(text, ("ID",))
    if "Kernel Name" not in header:
        raise NcuCsvError("raw page has no 'Kernel Name' column")
    col = {h: i for i, h in enumerate(header)}
    units: dict[str, str] = {}
    if body and not body[0][col["ID"]].strip():
        units = {header[i]: u.strip() for i, u in enumerate(body[0]) if i < len(header) and u.strip()}
        body = body[1:]
    launches = []
    for row in body:
        cells = dict(zip(header, (c.strip() for c in row)))
        launch = Launch(
            id=cells.get("ID", ""),
            kernel=cells.get("Kernel Name", ""),
            block=parse_dim3(cells.get("Block Size")),
            grid=parse_dim3(cells.get("Grid Size")),
            device=cells.get("Device"),
        )
        for name, cell in cells.items():
            if name in _IDENTITY:
                continue
            value, unit = scale_value(parse_number(cell), units.get(name))
            launch.values[name] = value if value is not None else (cell or None)
            if unit:
                launch.units[name] = unit
        launches.append(launch)
    return launches


def parse_details_page(text: str) -> list[Launch]:
    """`--page details`: one row per (launch, section, metric), plus rule rows.

    Metric cells go to ``values`` keyed "<Section>/<Metric Name>"; rule rows (those with a
    Rule Name/Description) go to ``rules``.
    """
    header, body = read_rows(text, ("ID",))
    need = ("Kernel Name", "Metric Name", "Metric Value")
    missing = [n for n in need if n not in header]
    if missing:
        raise NcuCsvError(f"details page lacks column(s) {', '.join(missing)}")
    by_id: dict[str, Launch] = {}
    for row in body:
        cells = dict(zip(header, (c.strip() for c in row)))
        lid = cells.get("ID", "")
        launch = by_id.get(lid)
        if launch is None:
            launch = by_id[lid] = Launch(
                id=lid,
                kernel=cells.get("Kernel Name", ""),
                block=parse_dim3(cells.get("Block Size")),
                grid=parse_dim3(cells.get("Grid Size")),
                device=cells.get("Device"),
            )
        rule = cells.get("Rule Name") or ""
        desc = cells.get("Rule Description") or ""
        if rule and desc:
            speedup = parse_number(cells.get("Estimated Speedup"))
            entry = {"rule": rule, "type": cells.get("Rule Type") or None, "section": cells.get("Section Name") or None,
                     "description": " ".join(desc.split()), "estimated_speedup_pct": speedup}
            if entry not in launch.rules:
                launch.rules.append(entry)
        metric = cells.get("Metric Name") or ""
        if not metric:
            continue
        key = f"{cells.get('Section Name', '')}/{metric}"
        value, unit = scale_value(parse_number(cells.get("Metric Value")), cells.get("Metric Unit"))
        launch.values[key] = value if value is not None else (cells.get("Metric Value") or None)
        if unit:
            launch.units[key] = unit
    return list(by_id.values())
