"""AKA's Diagnosis of one profile: the patterns the Atrex Kernel Agent's classifier
(its ``tools/classify_ncu.py``) names on the same metrics file, shown beside episcope's own.

Both read ``analysis/metrics_key_run.json``, one flat object of ncu metric names plus
``__kernel_name__``. episcope's Diagnosis (``diagnosis.py``) differs from AKA's on purpose
(``skills/gpu-kernel-episode-loop/references/diagnosis-vs-aka.md`` says where and why); this
module says what AKA's would name, so an operator sees both. The rules, thresholds, labels,
confidences and evidence wording are AKA's (main at 16f7ec4), and the tests hold them to what
AKA's classifier printed on every real H200 capture (``tests/fixtures/aka/classify_ncu/``).

AKA's reading of a value is kept, even where episcope's differs: a missing or non-numeric
metric is unknown, except the local-memory and atomic counters, which count as 0; a numeric
string counts as its number. Where AKA's classifier would stop on a non-finite count (it
writes counts as integers), the evidence writes the value as it is.

Standard library only, like the rest of the funnel.
"""

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

# id -> (AKA's label, the symptom AKA files it under); AKA's own table, "_mem" included.
PATTERNS = {
    "A": ("Small grid / SM idle", "low-sm-utilization"),
    "B": ("Tail effect (wave quantization)", "tail-effect"),
    "C": ("Uncoalesced global loads", "memory-bound"),
    "D": ("Sparse writes (low store efficiency)", "memory-bound"),
    "E": ("Latency-bound (long-scoreboard)", "memory-bound"),
    "F": ("Compute-bound but not on tensor cores", "compute-bound"),
    "G": ("Atomics contention", "compute-bound"),
    "H": ("Shared-memory bank conflicts", "memory-bound"),
    "I": ("Synchronization overhead", "pipeline-stalls"),
    "J": ("Low achieved vs theoretical occupancy", "low-sm-utilization"),
    "K": ("Register spill", "register-pressure"),
    "L": ("FP64 used unintentionally", "compute-bound"),
    "M": ("Pipeline bubbles (no compute/memory overlap)", "pipeline-stalls"),
    "N": ("Warp divergence", "compute-bound"),
    "_mem": ("Overall memory-bound", "memory-bound"),
}

KERNEL_KEY = "__kernel_name__"

WAVES = "launch__waves_per_multiprocessor"
GRID = "launch__grid_size"
SM_COUNT = "device__attribute_multiprocessor_count"
LD_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum"
LD_REQUESTS = "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"
ST_BYTES_PER_SECTOR = "smsp__sass_average_data_bytes_per_sector_mem_global_op_st.ratio"
LONG_SCOREBOARD = "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio"
SHORT_SCOREBOARD = "smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio"
BARRIER = "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
LG_THROTTLE = "smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio"
DRAM_READ_PCT = "dram__bytes_read.sum.pct_of_peak_sustained_elapsed"
FMA_PIPE = "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active"
TENSOR_PIPE = "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"
ATOM_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_atom.sum"
RED_SECTORS = "l1tex__t_sectors_pipe_lsu_mem_global_op_red.sum"
THEORETICAL_OCC = "sm__maximum_warps_per_active_cycle_pct"
ACHIEVED_OCC = "sm__warps_active.avg.pct_of_peak_sustained_active"
LOCAL_LD = "smsp__sass_inst_executed_op_local_ld.sum"
LOCAL_ST = "smsp__sass_inst_executed_op_local_st.sum"
REGISTERS = "launch__registers_per_thread"
FP64_PIPE = "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active"
THREADS_PER_INST = "smsp__thread_inst_executed_per_inst_executed.ratio"
SM_THROUGHPUT = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEM_THROUGHPUT = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"


class AkaPattern(NamedTuple):
    """One pattern AKA's classifier names, as its ``--json`` output gives it."""

    id: str
    confidence: str  # high | medium | low
    label: str
    evidence: str

    def to_json(self) -> dict[str, str]:
        return {"id": self.id, "confidence": self.confidence, "label": self.label, "evidence": self.evidence}


class Metrics:
    """The flat metrics object read the way AKA's classifier reads it."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = values

    def get(self, name: str, missing: float | None = None) -> float | None:
        value = self._values.get(name)
        if value is None:
            return missing
        try:
            return float(value)
        except (TypeError, ValueError):
            return missing


def _count(value: float) -> str:
    return str(int(value)) if math.isfinite(value) else str(value)


def _pattern(pid: str, confidence: str, evidence: str) -> AkaPattern:
    return AkaPattern(pid, confidence, PATTERNS[pid][0], evidence)


def _small_grid(m: Metrics) -> AkaPattern | None:
    waves, grid, sms = m.get(WAVES), m.get(GRID), m.get(SM_COUNT)
    if waves is not None and waves < 0.5:
        return _pattern("A", "high", f"waves_per_multiprocessor={waves:.2f} < 0.5")
    if grid is not None and sms is not None and grid < sms:
        return _pattern("A", "medium", f"grid_size={_count(grid)} < sm_count={_count(sms)}")
    return None


def _tail_effect(m: Metrics) -> AkaPattern | None:
    # The last of ceil(W) waves is (ceil(W) - W) / ceil(W) idle; below one wave is A's case.
    waves = m.get(WAVES)
    if waves is None or not waves > 1.0 or not math.isfinite(waves):
        return None
    rounded = math.ceil(waves)
    idle = (rounded - waves) / rounded
    if not idle > 0.15:
        return None
    return _pattern("B", "medium", f"waves_per_multiprocessor={waves:.2f} -> last wave ~{idle * 100:.0f}% idle "
                                   f"(rounds up to {rounded} waves)")


def _uncoalesced_loads(m: Metrics) -> AkaPattern | None:
    sectors, requests = m.get(LD_SECTORS), m.get(LD_REQUESTS)
    if sectors is None or requests is None or not requests > 0:
        return None
    ratio = sectors / requests
    return _pattern("C", "high", f"sectors/requests={ratio:.1f} > 5 (ideal=4)") if ratio > 5 else None


def _sparse_writes(m: Metrics) -> AkaPattern | None:
    ratio = m.get(ST_BYTES_PER_SECTOR)
    if ratio is None or not ratio < 16:
        return None
    return _pattern("D", "medium", f"bytes_per_sector_st={ratio:.1f} < 16 (ideal=32)")


def _latency_bound(m: Metrics) -> AkaPattern | None:
    long_sb, dram_read = m.get(LONG_SCOREBOARD), m.get(DRAM_READ_PCT)
    if long_sb is None or not long_sb > 3:
        return None
    if dram_read is not None and dram_read < 10:
        return _pattern("E", "high", f"long_scoreboard_ratio={long_sb:.1f} > 3, dram_rd_pct={dram_read:.1f}% < 10% "
                                     "→ latency-bound, not BW-bound")
    return _pattern("E", "medium", f"long_scoreboard_ratio={long_sb:.1f} > 3")


def _compute_no_tensor(m: Metrics) -> AkaPattern | None:
    fma, tensor = m.get(FMA_PIPE), m.get(TENSOR_PIPE)
    if fma is None or not fma > 50 or (tensor is not None and not tensor < 1):
        return None
    return _pattern("F", "high", f"FMA_pipe={fma:.1f}% > 50%, tensor_core={tensor or 0:.1f}% ≈ 0")


def _atomics(m: Metrics) -> AkaPattern | None:
    # AKA's sign of contention: atomic/reduction traffic while the LSU pipe throttles.
    sectors = m.get(ATOM_SECTORS, 0.0) + m.get(RED_SECTORS, 0.0)
    throttle = m.get(LG_THROTTLE)
    if not sectors > 0 or throttle is None or not throttle > 1.0:
        return None
    return _pattern("G", "low", f"atomic+red sectors={_count(sectors)}, lg_throttle={throttle:.1f} "
                                "(possible atomics contention — confirm)")


def _bank_conflicts(m: Metrics) -> AkaPattern | None:
    short_sb = m.get(SHORT_SCOREBOARD)
    if short_sb is None or not short_sb > 2:
        return None
    return _pattern("H", "low", f"short_scoreboard_ratio={short_sb:.1f} > 2 "
                                "(heuristic — confirm with l1tex bank-conflict counters)")


def _sync_overhead(m: Metrics) -> AkaPattern | None:
    barrier = m.get(BARRIER)
    if barrier is None or not barrier > 2:
        return None
    return _pattern("I", "medium", f"barrier_stall_ratio={barrier:.1f} > 2")


def _low_occupancy(m: Metrics) -> AkaPattern | None:
    theoretical, achieved = m.get(THEORETICAL_OCC), m.get(ACHIEVED_OCC)
    if theoretical is None or achieved is None or not theoretical > 50 or not achieved < theoretical * 0.5:
        return None
    return _pattern("J", "medium", f"theoretical_occ={theoretical:.1f}%, achieved_occ={achieved:.1f}% (gap > 50%)")


def _register_spill(m: Metrics) -> AkaPattern | None:
    loads, stores, registers = m.get(LOCAL_LD, 0.0), m.get(LOCAL_ST, 0.0), m.get(REGISTERS)
    if loads > 0 or stores > 0:
        shown = _count(registers) if registers else "?"
        return _pattern("K", "high", f"local_ld={_count(loads)}, local_st={_count(stores)}, regs/thread={shown}")
    if registers is not None and registers > 128:
        return _pattern("K", "medium", f"regs/thread={_count(registers)} > 128 (spill risk)")
    return None


def _fp64(m: Metrics) -> AkaPattern | None:
    pipe = m.get(FP64_PIPE)
    if pipe is None or not pipe > 1.0:
        return None
    return _pattern("L", "medium", f"fp64_pipe_active={pipe:.1f}% > 1% in non-FP64 kernel")


def _pipeline_bubbles(m: Metrics) -> AkaPattern | None:
    long_sb, dram_read = m.get(LONG_SCOREBOARD), m.get(DRAM_READ_PCT)
    if long_sb is None or dram_read is None or not long_sb > 2 or not dram_read > 30:
        return None
    return _pattern("M", "medium", f"long_scoreboard={long_sb:.1f} + dram_rd_pct={dram_read:.1f}% "
                                   "→ load/compute possibly not overlapping")


def _divergence(m: Metrics) -> AkaPattern | None:
    threads = m.get(THREADS_PER_INST)
    if threads is None or not threads < 24:
        return None
    return _pattern("N", "medium", f"active_threads_per_warp={threads:.1f} < 24 "
                                   f"(of 32 → {threads / 32 * 100:.0f}% lane utilization)")


def _overall_memory_bound(m: Metrics, found: list[AkaPattern]) -> AkaPattern | None:
    # AKA names it only when no other memory-bound pattern already did.
    sm, mem = m.get(SM_THROUGHPUT), m.get(MEM_THROUGHPUT)
    if sm is None or mem is None or not mem > sm * 1.5 or not mem > 30:
        return None
    if any(PATTERNS[p.id][1] == "memory-bound" for p in found):
        return None
    return _pattern("_mem", "medium", f"mem_throughput={mem:.1f}% >> sm_throughput={sm:.1f}%")


RULES: tuple[Callable[[Metrics], AkaPattern | None], ...] = (
    _small_grid, _tail_effect, _uncoalesced_loads, _sparse_writes, _latency_bound, _compute_no_tensor,
    _atomics, _bank_conflicts, _sync_overhead, _low_occupancy, _register_spill, _fp64, _pipeline_bubbles,
    _divergence,
)


def is_aka_layout(obj: Any) -> bool:
    """A metrics file AKA's classifier is meant for: a flat object that names its kernel
    (an older episcope file, ``{"kernels": [...]}``, is not)."""
    return isinstance(obj, dict) and KERNEL_KEY in obj


def classify(values: Mapping[str, Any]) -> tuple[AkaPattern, ...]:
    """The patterns AKA's classifier names for one flat metrics object, in AKA's order."""
    m = Metrics(values)
    found = [p for p in (rule(m) for rule in RULES) if p is not None]
    overall = _overall_memory_bound(m, found)
    return tuple(found + ([overall] if overall is not None else []))
