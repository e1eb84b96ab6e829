"""The problem contract of a workspace: which shapes exist and how to build their inputs.

Shared by ``tools/evaluate.py`` (``test_kernel.py``) and ``profile_driver.py``; both run with
plain ``python3`` on the GPU machine, so this module uses the standard library at import
time and imports cupy only inside the functions that build inputs.

Three layouts are understood (FORMATS §1), tried in this order:

- ``definition.json`` + ``workload.jsonl`` (SOL style): one workload per line,
  ``{"workload": {"uuid": .., "axes": {..}}}``; the shape id is the workload uuid.
  Inputs come from ``input.py`` when present, else from the definition's ``inputs``
  (standard-normal arrays of the declared shape and dtype).
- ``agent_problem.json`` + ``input.py``: ``{"shapes": [..]}`` (or ``"workloads"``), each entry a
  dict of axes with an optional ``"id"`` (or ``"uuid"``, ``"name"``).
- ``shapes.json`` + ``input.py`` (legacy): a list of such entries, or ``{"shapes": [..]}``.

``input.py`` defines ``make_inputs(axes: dict, seed: int)`` returning a tuple of arrays (a
single array is accepted too). ``reference.py`` defines ``reference(*inputs)`` and
``kernel.py`` defines ``kernel(*inputs)``; each returns one array or a tuple of arrays.

A problem may also state its own correctness rule:

- ``"tolerance": {"atol": .., "rtol": ..}`` in ``definition.json`` or ``agent_problem.json``:
  the evaluator's defaults when its ``--atol``/``--rtol`` are not given;
- ``check(output, *inputs)`` in ``reference.py``: an invariant every kernel output must keep
  (a softmax row sums to 1, say); it returns ``None`` or a one-line reason.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from dataclasses import dataclass
from pathlib import Path

INPUT_FUNCTION = "make_inputs"
CHECK_FUNCTION = "check"
_ID_KEYS = ("id", "uuid", "name")


class ProblemError(Exception):
    """The workspace's contract is missing or malformed (message is one line)."""


@dataclass(frozen=True)
class Case:
    """One shape of the contract. ``index`` is the ``sid`` used in failure messages."""

    index: int
    shape_id: str
    axes: dict

    @property
    def label(self) -> str:
        dims = " ".join(f"{k}={v}" for k, v in self.axes.items())
        return f"sid={self.index} {dims}".strip()

    def to_json(self) -> dict:
        return {"index": self.index, "shape_id": self.shape_id, "axes": dict(self.axes)}

    @classmethod
    def from_json(cls, obj: dict) -> Case:
        return cls(int(obj["index"]), str(obj["shape_id"]), dict(obj["axes"]))


@dataclass(frozen=True)
class Contract:
    layout: str  # "definition" | "agent_problem" | "shapes"
    cases: tuple[Case, ...]
    definition: dict | None = None
    tolerance: dict | None = None  # {"atol": float, "rtol": float} the problem asks for


def _tolerance(document, source: str) -> dict | None:
    value = document.get("tolerance") if isinstance(document, dict) else None
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"atol", "rtol"}:
        raise ProblemError(f"{source}: 'tolerance' must be an object with 'atol' and/or 'rtol'")
    for key, number in value.items():
        if isinstance(number, bool) or not isinstance(number, (int, float)) or not 0 <= number < float("inf"):
            raise ProblemError(f"{source}: tolerance {key} must be a finite number >= 0")
    return {key: float(number) for key, number in value.items()}


def _read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProblemError(f"{path.name}: {exc}") from None


def _axes_entry(entry, index: int, source: str) -> Case:
    if not isinstance(entry, dict):
        raise ProblemError(f"{source}: shape {index} is not an object")
    shape_id = next((str(entry[k]) for k in _ID_KEYS if entry.get(k) is not None), str(index))
    axes = entry.get("axes") if isinstance(entry.get("axes"), dict) else {
        k: v for k, v in entry.items() if k not in _ID_KEYS
    }
    return Case(index, shape_id, dict(axes))


def _definition_cases(workspace: Path) -> tuple[Case, ...]:
    path = workspace / "workload.jsonl"
    try:
        lines = path.read_bytes().splitlines()
    except OSError as exc:
        raise ProblemError(f"workload.jsonl: {exc.strerror or exc}") from None
    cases: list[Case] = []
    offset = 0
    for raw in lines:
        line_offset, offset = offset, offset + len(raw) + 1
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
            workload = record["workload"]
            uuid, axes = str(workload["uuid"]), workload["axes"]
            if not isinstance(axes, dict):
                raise TypeError("axes is not an object")
        except (ValueError, KeyError, TypeError) as exc:
            raise ProblemError(f"workload.jsonl@{line_offset}: bad workload line ({exc})") from None
        cases.append(Case(len(cases), uuid, dict(axes)))
    return tuple(cases)


def load_contract(workspace: str | Path) -> Contract:
    workspace = Path(workspace)
    if (workspace / "definition.json").is_file():
        definition = _read_json(workspace / "definition.json")
        if not isinstance(definition, dict):
            raise ProblemError("definition.json: not an object")
        order = list(definition.get("axes") or {}) if isinstance(definition.get("axes"), dict) else []
        cases = tuple(
            Case(c.index, c.shape_id, {**{k: c.axes[k] for k in order if k in c.axes}, **c.axes})
            for c in _definition_cases(workspace)
        )
        layout, tolerance = "definition", _tolerance(definition, "definition.json")
    elif (workspace / "agent_problem.json").is_file():
        problem = _read_json(workspace / "agent_problem.json")
        entries = problem.get("shapes", problem.get("workloads")) if isinstance(problem, dict) else None
        if not isinstance(entries, list):
            raise ProblemError("agent_problem.json: no 'shapes' (or 'workloads') list")
        cases = tuple(_axes_entry(e, i, "agent_problem.json") for i, e in enumerate(entries))
        definition, layout = None, "agent_problem"
        tolerance = _tolerance(problem, "agent_problem.json")
    elif (workspace / "shapes.json").is_file():
        shapes = _read_json(workspace / "shapes.json")
        entries = shapes.get("shapes") if isinstance(shapes, dict) else shapes
        if not isinstance(entries, list):
            raise ProblemError("shapes.json: expected a list of shapes")
        cases = tuple(_axes_entry(e, i, "shapes.json") for i, e in enumerate(entries))
        definition, layout, tolerance = None, "shapes", None
    else:
        raise ProblemError(
            f"{workspace}: no contract (definition.json + workload.jsonl, agent_problem.json or shapes.json)"
        )
    if not cases:
        raise ProblemError(f"{layout}: the contract lists no shapes")
    if layout != "definition" and not (workspace / "input.py").is_file():
        raise ProblemError(f"{layout} layout needs input.py")
    return Contract(layout, cases, definition, tolerance)


def select_cases(cases: tuple[Case, ...], selectors: list[str] | None) -> tuple[Case, ...]:
    """Cases named by ``selectors`` (index or shape id, comma lists allowed); all when empty."""
    wanted = [s.strip() for item in (selectors or []) for s in str(item).split(",") if s.strip()]
    if not wanted:
        return cases
    chosen: list[Case] = []
    for token in wanted:
        match = next((c for c in cases if c.shape_id == token), None)
        if match is None and token.isdigit() and int(token) < len(cases):
            match = cases[int(token)]
        if match is None:
            raise ProblemError(f"unknown shape {token!r} (give an index 0..{len(cases) - 1} or a shape id)")
        if match not in chosen:
            chosen.append(match)
    return tuple(chosen)


def load_module(workspace: str | Path, name: str):
    """Import ``<workspace>/<name>.py`` fresh, with the workspace first on ``sys.path``."""
    path = Path(workspace) / f"{name}.py"
    if not path.is_file():
        raise ProblemError(f"{name}.py not found in {workspace}")
    root = str(Path(workspace).resolve())
    if root not in sys.path:
        sys.path.insert(0, root)
    spec = importlib.util.spec_from_file_location(f"_workspace_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def as_tuple(value) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


class InputBuilder:
    """Builds a case's inputs for a seed: ``input.py`` when present, else the definition."""

    def __init__(self, workspace: str | Path, contract: Contract) -> None:
        self.contract = contract
        self._make = None
        if (Path(workspace) / "input.py").is_file():
            module = load_module(workspace, "input")
            self._make = getattr(module, INPUT_FUNCTION, None)
            if not callable(self._make):
                raise ProblemError(f"input.py defines no {INPUT_FUNCTION}(axes, seed)")
        elif contract.definition is None or not isinstance(contract.definition.get("inputs"), dict):
            raise ProblemError("no input.py and no 'inputs' in definition.json")

    def __call__(self, case: Case, seed: int) -> tuple:
        if self._make is not None:
            return as_tuple(self._make(dict(case.axes), seed))
        return self._from_definition(case, seed)

    def _from_definition(self, case: Case, seed: int) -> tuple:
        import cupy

        rng = cupy.random.default_rng(seed)
        arrays = []
        for name, spec in self.contract.definition["inputs"].items():
            try:
                shape = tuple(int(case.axes[d]) if isinstance(d, str) else int(d) for d in spec["shape"])
                dtype = cupy.dtype(spec.get("dtype", "float32"))
            except (KeyError, TypeError, ValueError) as exc:
                raise ProblemError(f"definition.json: input {name!r} cannot be built ({exc})") from None
            if dtype.kind == "f":
                arrays.append(rng.standard_normal(shape, dtype=cupy.float32).astype(dtype))
            else:
                arrays.append(rng.integers(0, 128, size=shape).astype(dtype))
        return tuple(arrays)
