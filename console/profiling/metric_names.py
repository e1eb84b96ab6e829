"""The ncu metric names the funnel reads, in one place.

Each logical key lists the metric names that carry it, best first: ncu versions and chips
name a few counters differently, and the first one present in a profile wins.
"""

from __future__ import annotations

import re
import sys

STALL_REASONS = (
    "long_scoreboard",
    "short_scoreboard",
    "wait",
    "barrier",
    "math_throttle",
    "mio_throttle",
    "lg_throttle",
    "not_selected",
)
# Further stall reasons read by the pipeline-bubble pattern; not shown in summary.txt.
EXTRA_STALL_REASONS = ("no_instruction", "branch_resolving", "dispatch_stall", "membar", "drain", "tex_throttle")

# ncu spells "math_throttle" as math_pipe_throttle in its counter names.
_STALL_COUNTER = {"math_throttle": "math_pipe_throttle"}


def stall_metric(reason: str) -> str:
    name = _STALL_COUNTER.get(reason, reason)
    return f"smsp__average_warps_issue_stalled_{name}_per_issue_active.ratio"


KEY_METRICS: dict[str, tuple[str, ...]] = {
    "duration_ns": ("gpu__time_duration.sum",),
    "compute_sol_pct": ("sm__throughput.avg.pct_of_peak_sustained_elapsed",),
    "mem_sol_pct": ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",),
    "dram_pct": ("dram__throughput.avg.pct_of_peak_sustained_elapsed",),
    "occupancy_pct": ("sm__warps_active.avg.pct_of_peak_sustained_active",),
    "theoretical_occupancy_pct": ("sm__maximum_warps_per_active_cycle_pct",),
    "grid_size": ("launch__grid_size",),
    "block_size": ("launch__block_size",),
    "registers_per_thread": ("launch__registers_per_thread",),
    "shared_mem_per_block": ("launch__shared_mem_per_block",),
    "waves_per_sm": ("launch__waves_per_multiprocessor",),
    "sm_count": ("device__attribute_multiprocessor_count", "launch__sm_count"),
    "l1_hit_pct": ("l1tex__t_sector_hit_rate.pct",),
    "l2_hit_pct": ("lts__t_sector_hit_rate.pct",),
    "issue_active_pct": ("sm__issue_active.avg.pct_of_peak_sustained_active", "smsp__issue_active.avg.pct_of_peak_sustained_active"),
    "fma_pipe_pct": (
        "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active",
    ),
    "fp64_pipe_pct": (
        "sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_active",
        "sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active",
    ),
    "local_ld_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",),
    "local_st_bytes": ("l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",),
    "local_ld_inst": ("smsp__inst_executed_op_local_ld.sum", "smsp__sass_inst_executed_op_local_ld.sum"),
    "local_st_inst": ("smsp__inst_executed_op_local_st.sum", "smsp__sass_inst_executed_op_local_st.sum"),
    "global_ld_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",),
    "global_ld_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",),
    "global_st_sectors": ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",),
    "global_st_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",),
    "global_ld_bytes_per_sector_pct": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_ld.pct",),
    "global_st_bytes_per_sector_pct": ("smsp__sass_average_data_bytes_per_sector_mem_global_op_st.pct",),
    "global_atom_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_atom.sum",),
    "global_red_requests": ("l1tex__t_requests_pipe_lsu_mem_global_op_red.sum",),
    "shared_ld_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",),
    "shared_st_wavefronts": ("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",),
    "shared_ld_requests": (
        "l1tex__t_requests_pipe_lsu_mem_shared_op_ld.sum",
        "smsp__inst_executed_op_shared_ld.sum",
        "smsp__sass_inst_executed_op_shared_ld.sum",
    ),
    "shared_st_requests": (
        "l1tex__t_requests_pipe_lsu_mem_shared_op_st.sum",
        "smsp__inst_executed_op_shared_st.sum",
        "smsp__sass_inst_executed_op_shared_st.sum",
    ),
    "shared_ld_bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",),
    "shared_st_bank_conflicts": ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",),
    "threads_per_inst": ("smsp__thread_inst_executed_per_inst_executed.ratio",),
    "fp64_inst": (
        "smsp__sass_thread_inst_executed_op_dfma_pred_on.sum",
    ),
    "fp64_add_inst": ("smsp__sass_thread_inst_executed_op_dadd_pred_on.sum",),
    "fp64_mul_inst": ("smsp__sass_thread_inst_executed_op_dmul_pred_on.sum",),
    "fp32_fma_inst": ("smsp__sass_thread_inst_executed_op_ffma_pred_on.sum",),
    "fp32_add_inst": ("smsp__sass_thread_inst_executed_op_fadd_pred_on.sum",),
    "fp32_mul_inst": ("smsp__sass_thread_inst_executed_op_fmul_pred_on.sum",),
}
for _reason in STALL_REASONS + EXTRA_STALL_REASONS:
    KEY_METRICS[f"stall_{_reason}"] = (stall_metric(_reason),)

# Tensor-pipe use goes by several names (hmma, gmma/wgmma on Hopper, imma): the highest
# utilisation among the metrics matching this wins.
TENSOR_PATTERN = re.compile(r"^sm__(pipe_tensor|inst_executed_pipe_tensor)\w*\.avg\.pct_of_peak_sustained_active$")

TENSOR_CANDIDATES = (
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_gmma.avg.pct_of_peak_sustained_active",
)


def deep_extra_metrics() -> list[str]:
    """Every counter the deep level asks for on top of ``--set full``."""
    names: list[str] = []
    for key, candidates in KEY_METRICS.items():
        if key.startswith("stall_") or key in ("duration_ns",):
            names.append(candidates[0])
            continue
        names.extend(c for c in candidates if not c.startswith("launch__") and not c.startswith("device__"))
    names.extend(TENSOR_CANDIDATES)
    return list(dict.fromkeys(names))


# The few counters sol adds to its sections so that divergence, the fp64 and FMA pipes,
# atomics, spills and uncoalesced access (patterns C, D, G, K, L, N, and F's tensor check) can
# show before deep: hardware counters only, no SASS-patched ones (those replay the kernel with
# instrumented code, which is what makes deep slow), and the stall ratios. profile_nvidia.sh
# passes them without asking `ncu --query-metrics` first (1.8 s per profile on the H200);
# if this ncu refuses one, it profiles again with the sections alone.
SOL_EXTRA_KEYS = (
    "threads_per_inst", "fma_pipe_pct", "fp64_pipe_pct", "local_ld_bytes", "local_st_bytes",
    "global_ld_sectors", "global_ld_requests", "global_st_sectors", "global_st_requests",
    "global_atom_requests", "global_red_requests",
)


def sol_extra_metrics() -> list[str]:
    """Every counter the sol level asks for on top of its sections."""
    names = [KEY_METRICS[key][0] for key in SOL_EXTRA_KEYS]
    names += [KEY_METRICS[f"stall_{r}"][0] for r in STALL_REASONS + EXTRA_STALL_REASONS]
    names.append(TENSOR_CANDIDATES[0])  # hmma cycles: what ncu 2025.3 reports on sm_90
    return list(dict.fromkeys(names))


def known_base_names(query_output: str) -> set[str]:
    """Base metric names from ``ncu --query-metrics`` output (first word of each row)."""
    known = set()
    for line in query_output.splitlines():
        word = line.split(None, 1)[0] if line.strip() else ""
        if "__" in word:
            known.add(word)
    return known


def filter_known(names: list[str], known: set[str]) -> list[str]:
    return [n for n in names if n.split(".", 1)[0] in known]


def main(argv: list[str]) -> int:
    if argv == ["--known-from-stdin"]:
        known = known_base_names(sys.stdin.read())
        print(",".join(filter_known(deep_extra_metrics(), known)))
        return 0
    print("usage: python3 -m console.profiling.metric_names --known-from-stdin", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
