"""Diagnosis patterns over one kernel's key metrics (FORMATS §9).

Each pattern reads only the key metrics of ``metric_names.KEY_METRICS`` and fires only when
every metric it needs is known: an unknown metric never counts as 0. A fired pattern carries
one-line evidence that quotes the numbers and the threshold it crossed.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

from .metric_names import STALL_REASONS

LABELS = {
    "A": "small-grid",
    "B": "tail-effect",
    "C": "uncoalesced-loads",
    "D": "sparse-writes",
    "E": "latency-bound",
    "F": "compute-no-tensor",
    "G": "atomics-contention",
    "H": "bank-conflicts",
    "I": "sync-overhead",
    "J": "low-achieved-occupancy",
    "K": "register-spill",
    "L": "unintended-fp64",
    "M": "pipeline-bubbles",
    "N": "warp-divergence",
    "_mem": "overall-memory-bound",
}
SEVERITIES = ("high", "medium", "low")
SYMPTOMS = ("low-sm-utilization", "tail-effect", "memory-bound", "compute-bound", "pipeline-stalls", "register-pressure")
PATTERN_SYMPTOM = {
    "A": "low-sm-utilization",
    "J": "low-sm-utilization",
    "B": "tail-effect",
    "C": "memory-bound",
    "D": "memory-bound",
    "G": "memory-bound",
    "H": "memory-bound",
    "_mem": "memory-bound",
    "F": "compute-bound",
    "L": "compute-bound",
    "E": "pipeline-stalls",
    "I": "pipeline-stalls",
    "M": "pipeline-stalls",
    "N": "pipeline-stalls",
    "K": "register-pressure",
}
# Where the line-level evidence for a symptom lives (files written by a --source run).
# At sol no such file exists yet: LOCALIZE names them with DEEP_SOURCE_HINT in front, the
# run that writes them.
DEEP_SOURCE_HINT = "deep --source: "
LOCALIZE_FILES = {
    "memory-bound": ("source_metrics_line_run.txt", "warp_stalls_line_run.txt"),
    "pipeline-stalls": ("warp_stalls_line_run.txt",),
    "compute-bound": ("warp_stalls_line_run.txt", "disasm_run.txt"),
    "register-pressure": ("disasm_run.txt",),
}

# SOL thresholds: ncu's own guidance calls a unit busy above 60% of its peak.
BUSY_PCT = 60.0
# On sm_90 the hmma tensor-pipe counter reads ~5% on pure FFMA code, so below 15% the
# tensor cores count as unused.
TENSOR_IDLE_PCT = 15.0
# Where only the fp64 pipe's utilisation is known (sol), a pipe this busy means the kernel's
# time goes to double-precision arithmetic.
FP64_PIPE_BUSY_PCT = 20.0
# Shared-memory conflicts matter only where shared loads/stores are a real part of the work:
# a TMA/wgmma GEMM issues few LSU shared requests, whose wavefront ratio means little.
SHARED_MIN_REQUESTS_PER_BLOCK = 1024


@dataclass(frozen=True, slots=True)
class Pattern:
    id: str
    severity: str
    evidence: tuple[str, ...]

    @property
    def label(self) -> str:
        return LABELS[self.id]

    def to_json(self) -> dict:
        return {"id": self.id, "label": self.label, "severity": self.severity, "evidence": list(self.evidence)}


def _f(v: float | None, digits: int = 1) -> str:
    return "n/a" if v is None else f"{v:,.{digits}f}"


def _sum(*values: float | None) -> float | None:
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def top_stalls(m: dict, limit: int = 5, floor: float = 0.1) -> list[tuple[str, float]]:
    """The summary's stall reasons: at most ``limit`` above ``floor`` cycles per issue."""
    stalls = [(r, m.get(f"stall_{r}")) for r in STALL_REASONS]
    known = [(r, v) for r, v in stalls if v is not None and v > floor]
    return sorted(known, key=lambda rv: -rv[1])[:limit]


def _small_grid(m):
    grid, sms = m.get("grid_size"), m.get("sm_count")
    if grid is None or sms is None or sms <= 0 or grid >= sms:
        return None
    sev = "high" if grid <= sms / 2 else "medium"
    return Pattern("A", sev, (f"grid {grid:.0f} blocks < {sms:.0f} SMs: at most {100 * grid / sms:.0f}% of SMs get work",))


def _tail_effect(m):
    waves = m.get("waves_per_sm")
    if waves is None or waves < 1.0:
        return None
    full = math.floor(waves)
    frac = waves - full
    if frac < 1e-6:
        return None
    idle = (1.0 - frac) / math.ceil(waves)
    if idle < 0.10:
        return None
    sev = "high" if idle >= 0.25 else "medium"
    return Pattern("B", sev, (f"{waves:.2f} waves per SM: the last wave fills {100 * frac:.0f}% of the GPU, "
                              f"~{100 * idle:.0f}% of SM time idles in the tail (threshold 10%)",))


def _memory_bound(m):
    mem, comp = m.get("mem_sol_pct"), m.get("compute_sol_pct")
    if mem is None or comp is None or mem < BUSY_PCT or mem < comp:
        return None
    sev = "high" if mem >= 80 else "medium"
    return Pattern("_mem", sev, (f"memory throughput {_f(mem)}% of peak >= {BUSY_PCT:.0f}% and above compute "
                                 f"{_f(comp)}% (DRAM {_f(m.get('dram_pct'))}%)",))


def _latency_bound(m, fired):
    mem, comp = m.get("mem_sol_pct"), m.get("compute_sol_pct")
    if mem is None or comp is None or max(mem, comp) >= BUSY_PCT or "A" in fired:
        return None
    sev = "high" if max(mem, comp) < 30 else "medium"
    ev = [f"compute {_f(comp)}% and memory {_f(mem)}% of peak both < {BUSY_PCT:.0f}%: neither unit is busy"]
    stalls = top_stalls(m, limit=2)
    if stalls:
        ev.append("top stalls: " + ", ".join(f"{r} {v:.2f} cycles/issue" for r, v in stalls))
    return Pattern("E", sev, tuple(ev))


def _compute_no_tensor(m, fired):
    comp, mem, tensor = m.get("compute_sol_pct"), m.get("mem_sol_pct"), m.get("tensor_pct")
    if comp is None or tensor is None or comp < BUSY_PCT or (mem is not None and mem > comp) or tensor >= TENSOR_IDLE_PCT:
        return None
    fma, fp64 = m.get("fma_pipe_pct"), m.get("fp64_pipe_pct")
    # Tensor cores are the answer only where FP32 math is the limit: not where the fp64 pipe
    # is busier than the FMA pipe, nor where divergence or fp64 was already named.
    if "L" in fired or "N" in fired or (fp64 is not None and fp64 > (fma or 0.0)):
        return None
    sev = "high" if fma is not None and fma >= BUSY_PCT else "medium"
    return Pattern("F", sev, (f"SM throughput {_f(comp)}% with tensor pipe {_f(tensor)}% (< {TENSOR_IDLE_PCT:.0f}%); FMA pipe {_f(fma)}%",))


def _register_spill(m):
    ld, st = m.get("local_ld_bytes"), m.get("local_st_bytes")
    ldi, sti = m.get("local_ld_inst"), m.get("local_st_inst")
    traffic = _sum(ld, st)
    insts = _sum(ldi, sti)
    if not traffic and not insts:
        return None
    glob = _sum(m.get("global_ld_sectors"), m.get("global_st_sectors"))
    share = None if traffic is None or not glob else traffic / (glob * 32.0)
    sev = "high" if share is None or share >= 0.1 else "medium"
    ev = [f"local memory loads {_f(ld, 0)} B / stores {_f(st, 0)} B "
          f"({_f(ldi, 0)} / {_f(sti, 0)} instructions); registers/thread {_f(m.get('registers_per_thread'), 0)}"]
    if share is not None:
        ev.append(f"local traffic is {share:,.2f}x the global traffic")
    return Pattern("K", sev, tuple(ev))


def _low_occupancy(m):
    ach, theo = m.get("occupancy_pct"), m.get("theoretical_occupancy_pct")
    if ach is None:
        return None
    if theo is not None and theo > 0:
        ratio = ach / theo
        if ratio >= 0.5:
            return None
        sev = "high" if ratio < 0.3 else "medium"
        return Pattern("J", sev, (f"achieved occupancy {_f(ach)}% is {100 * ratio:.0f}% of theoretical {_f(theo)}% (threshold 50%)",))
    if ach >= 25:
        return None
    return Pattern("J", "medium", (f"achieved occupancy {_f(ach)}% < 25% (theoretical unknown)",))


def _uncoalesced(m, op: str, pid: str, what: str):
    pct = m.get(f"global_{op}_bytes_per_sector_pct")
    sectors, requests = m.get(f"global_{op}_sectors"), m.get(f"global_{op}_requests")
    if not requests or not sectors:
        return None  # no LSU global traffic of this kind (TMA copies do not count here)
    per_req = sectors / requests
    if pct is not None:
        if pct >= 50:
            return None
        sev = "high" if pct < 25 else "medium"
        ev = [f"{what}: {_f(pct)}% of each fetched 32-byte sector is used (threshold 50%)"]
    elif per_req >= 16:
        sev = "high" if per_req >= 24 else "medium"
        ev = [f"{what}: {per_req:.1f} sectors per request (4 for coalesced 32-bit access)"]
    else:
        return None
    if pct is not None:
        ev.append(f"{per_req:.1f} sectors per request")
    return Pattern(pid, sev, tuple(ev))


def _bank_conflicts(m):
    # Wide shared accesses (LDS.128, ldmatrix) take several wavefronts with no conflict, so
    # the share of wavefronts that are conflict replays decides; wavefronts per request is
    # only the fallback where the conflict counter is missing.
    best = None
    for op in ("ld", "st"):
        wf, req = m.get(f"shared_{op}_wavefronts"), m.get(f"shared_{op}_requests")
        conflicts = m.get(f"shared_{op}_bank_conflicts")
        grid = m.get("grid_size")
        if not wf or not req or (grid and req < SHARED_MIN_REQUESTS_PER_BLOCK * grid):
            continue
        if conflicts is not None:
            score = conflicts / wf
            if score < 0.5:
                continue
        else:
            score = None
            if wf / req < 4.0:
                continue
        key = score if score is not None else (wf / req) / 32.0
        if best is None or key > best[0]:
            best = (key, op, wf, req, conflicts)
    if best is None:
        return None
    key, op, wf, req, conflicts = best
    sev = "high" if key >= 0.75 else "medium"
    what = "loads" if op == "ld" else "stores"
    ev = [f"shared {what}: {wf / req:.1f} wavefronts per request over {req:,.0f} requests"]
    if conflicts is not None:
        ev.append(f"{conflicts:,.0f} bank conflicts = {100 * conflicts / wf:.0f}% of shared {what} wavefronts (threshold 50%)")
    return Pattern("H", sev, tuple(ev))


def _stall_share(m, reasons) -> tuple[float | None, float | None]:
    from .metric_names import EXTRA_STALL_REASONS

    every = [m.get(f"stall_{r}") for r in STALL_REASONS + EXTRA_STALL_REASONS]
    total = _sum(*every)
    part = _sum(*(m.get(f"stall_{r}") for r in reasons))
    if total is None or part is None or total <= 0:
        return None, part
    return part / total, part


def _busy(m) -> bool:
    """A unit runs near its peak: stalls are then not what limits the kernel."""
    return any(v is not None and v >= BUSY_PCT for v in (m.get("compute_sol_pct"), m.get("mem_sol_pct")))


def _sync_overhead(m):
    if _busy(m):
        return None
    share, cycles = _stall_share(m, ("barrier", "membar"))
    if share is None or share < 0.2 or cycles < 1.0:
        return None
    sev = "high" if share >= 0.4 else "medium"
    return Pattern("I", sev, (f"barrier/membar stalls {cycles:.2f} cycles per issue = {100 * share:.0f}% of all stalls (threshold 20%)",))


def _pipeline_bubbles(m):
    if _busy(m):
        return None
    share, cycles = _stall_share(m, ("no_instruction", "branch_resolving", "dispatch_stall"))
    if share is None or share < 0.25 or cycles < 1.0:
        return None
    return Pattern("M", "medium", (f"instruction-fetch/branch/dispatch stalls {cycles:.2f} cycles per issue = "
                                   f"{100 * share:.0f}% of all stalls (threshold 25%)",))


def _atomics(m):
    atom = _sum(m.get("global_atom_requests"), m.get("global_red_requests"))
    loads = m.get("global_ld_requests")
    if not atom or loads is None:
        return None
    share = atom / (atom + loads + (m.get("global_st_requests") or 0.0))
    lg = m.get("stall_lg_throttle")
    grid = m.get("grid_size") or 1.0
    mem_share, _ = _stall_share(m, ("lg_throttle", "long_scoreboard", "membar"))
    # A handful of atomics per block (a GEMM's tile counter) is not contention.
    if share < 0.1 or atom < 32 * grid or mem_share is None or mem_share < 0.25:
        return None
    sev = "high" if lg is not None and lg >= 1.0 else "medium"
    return Pattern("G", sev, (f"atomic/reduction requests {atom:,.0f} = {100 * share:.0f}% of global requests "
                              f"(threshold 10%); lg_throttle {_f(lg, 2)} cycles/issue",))


def _fp64(m):
    fp64 = _sum(m.get("fp64_inst"), m.get("fp64_add_inst"), m.get("fp64_mul_inst"))
    fp32 = _sum(m.get("fp32_fma_inst"), m.get("fp32_add_inst"), m.get("fp32_mul_inst"))
    pipe = m.get("fp64_pipe_pct")
    if fp64 is None and pipe is not None:  # sol: the pipe's utilisation, no instruction counts
        if pipe < FP64_PIPE_BUSY_PCT:
            return None
        sev = "high" if pipe >= BUSY_PCT else "medium"
        return Pattern("L", sev, (f"fp64 pipe {pipe:.1f}% of peak (threshold {FP64_PIPE_BUSY_PCT:.0f}%); "
                                  f"FMA pipe {_f(m.get('fma_pipe_pct'))}%",))
    if not fp64 or fp32 is None:
        return None
    share = fp64 / (fp64 + fp32)
    if share < 0.01:
        return None
    sev = "high" if share >= 0.1 else "medium"
    return Pattern("L", sev, (f"fp64 thread instructions {fp64:,.0f} = {100 * share:.1f}% of fp arithmetic (threshold 1%)",))


def _divergence(m):
    tpi = m.get("threads_per_inst")
    if tpi is None or tpi >= 24:
        return None
    sev = "high" if tpi < 16 else "medium"
    return Pattern("N", sev, (f"{tpi:.1f} active threads per executed warp instruction (32 max, threshold 24)",))


def diagnose(m: dict) -> list[Pattern]:
    """Every pattern the key metrics ``m`` support, most severe first."""
    found: list[Pattern] = []
    for check in (_small_grid, _tail_effect, _memory_bound, _register_spill, _low_occupancy,
                  lambda x: _uncoalesced(x, "ld", "C", "global loads"),
                  lambda x: _uncoalesced(x, "st", "D", "global stores"),
                  _bank_conflicts, _sync_overhead, _pipeline_bubbles, _atomics, _fp64, _divergence):
        p = check(m)
        if p is not None:
            found.append(p)
    # F and E are judged against what already fired
    for check in (_compute_no_tensor, _latency_bound):
        p = check(m, {f.id for f in found})
        if p is not None:
            found.append(p)
    return sorted(found, key=lambda p: SEVERITIES.index(p.severity))


def symptoms_of(patterns) -> list[str]:
    """Symptoms in the fixed order of SYMPTOMS; ``patterns`` are Pattern objects or pattern ids."""
    ids = {p if isinstance(p, str) else p.id for p in patterns}
    present = {PATTERN_SYMPTOM[i] for i in ids if i in PATTERN_SYMPTOM}
    return [s for s in SYMPTOMS if s in present]


def localize(symptoms, profile_dir: str | os.PathLike, level: str = "deep") -> list[str]:
    """Where the line-level evidence for the symptoms lives, in symptom order.

    At deep: the ``analysis/<file>`` paths that exist (a --source run wrote them). At sol the
    same files prefixed with DEEP_SOURCE_HINT: the hint to go deep with --source and read them.
    """
    out: list[str] = []
    for symptom in symptoms:
        for name in LOCALIZE_FILES.get(symptom, ()):
            rel = f"analysis/{name}"
            if level == "sol":
                rel = DEEP_SOURCE_HINT + rel
            elif not os.path.isfile(os.path.join(profile_dir, rel)):
                continue
            if rel not in out:
                out.append(rel)
    return out
