#!/usr/bin/env bash
# Profile `python3 <file>` with Nsight Compute at one level of the profile funnel and write the
# profile directory of FORMATS §9: ncu.ncu-rep, gateway_profile.json, summary.txt, analysis/.
#
#   profile_nvidia.sh <file> --output-dir DIR [--kernel-name N] [--launch-skip N]
#                     [--launch-count N] [--source] [--diff PREV_DIR] [-- ARGS...]
#
# Environment: PROFILE_LEVEL survey|sol|deep (default sol), PROFILE_KERNEL_REGEX (a regex on
# the kernel's function name; deep needs one, or --kernel-name), PROFILE_TOP_KERNELS (kernels
# kept in gateway_profile.json), NCU (the ncu binary, default `ncu` on PATH).
# Exit codes: 0 profile written; 1 ncu or the program failed, or no kernel was profiled;
# 2 usage.
set -uo pipefail

prog=profile_nvidia.sh
die() { echo "$prog: $1" >&2; exit "${2:-1}"; }
usage() { sed -n '4,6p' "$0" | sed 's/^# \{0,1\}//'; }

file="" outdir="" kname="" skip="" count="" source=0 diff=""
args=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --output-dir) [[ $# -ge 2 ]] || die "--output-dir needs a value" 2; outdir=$2; shift 2 ;;
    --kernel-name) [[ $# -ge 2 ]] || die "--kernel-name needs a value" 2; kname=$2; shift 2 ;;
    --launch-skip) [[ $# -ge 2 ]] || die "--launch-skip needs a value" 2; skip=$2; shift 2 ;;
    --launch-count) [[ $# -ge 2 ]] || die "--launch-count needs a value" 2; count=$2; shift 2 ;;
    --source) source=1; shift ;;
    --diff) [[ $# -ge 2 ]] || die "--diff needs a value" 2; diff=$2; shift 2 ;;
    --) shift; args=("$@"); break ;;
    -h|--help) usage; exit 0 ;;
    -*) die "unknown option $1" 2 ;;
    *) [[ -z $file ]] || die "one program file only (got $file and $1)" 2; file=$1; shift ;;
  esac
done

[[ -n $file ]] || { usage >&2; die "missing the program file" 2; }
[[ -f $file ]] || die "no such file: $file" 2
[[ -n $outdir ]] || die "missing --output-dir" 2
for n in "$skip" "$count"; do
  [[ -z $n || $n =~ ^[0-9]+$ ]] || die "--launch-skip/--launch-count take a whole number, got $n" 2
done
[[ -z $diff || -d $diff ]] || die "--diff: no such directory: $diff" 2

level=${PROFILE_LEVEL:-sol}
case $level in survey|sol|deep) ;; *) die "PROFILE_LEVEL must be survey, sol or deep (got $level)" 2 ;; esac
regex=${PROFILE_KERNEL_REGEX:-}
top=${PROFILE_TOP_KERNELS:-}
[[ -z $top || $top =~ ^[0-9]+$ ]] || die "PROFILE_TOP_KERNELS must be a whole number (got $top)" 2

filter=()
if [[ -n $kname ]]; then
  filter=(--kernel-name "$kname")
elif [[ -n $regex ]]; then
  filter=(--kernel-name "regex:$regex")
elif [[ $level == deep ]]; then
  die "deep profiles one kernel: give PROFILE_KERNEL_REGEX='^<exact name>\$' or --kernel-name" 2
fi

# profile_driver.py brackets the kernel's own calls with cudaProfilerStart/Stop. Profiling
# only that range leaves out what building the inputs launched (random generators, casts):
# those can outlast a fast kernel and would become the survey's dominant kernel.
range=()
[[ $(basename -- "$file") == profile_driver.py ]] && range=(--profile-from-start off)

# deep and source replay a launch dozens of times: one launch unless asked otherwise.
[[ -n $count || $level != deep ]] || count=1
[[ -z $skip ]] || filter+=(--launch-skip "$skip")
[[ -z $count ]] || filter+=(--launch-count "$count")

NCU=${NCU:-ncu}
command -v "$NCU" >/dev/null 2>&1 || die "ncu not found (set NCU or put Nsight Compute on PATH)" 127

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
pyrun() { PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" python3 "$@"; }

mkdir -p "$outdir/analysis" || die "cannot create $outdir/analysis"
rm -f "$outdir/ncu.ncu-rep" "$outdir/ncu_source.ncu-rep" "$outdir/analysis/"*.csv

# Metrics the funnel levels need. sol adds the SOL/occupancy/launch sections (cheap) and the
# few hardware counters that let divergence, fp64, atomics, spills and uncoalesced access show
# (console/profiling/metric_names.py SOL_EXTRA_KEYS); deep is `--set full` plus the counters the
# diagnosis patterns read. Extra counters are kept only if this ncu knows them.
sol_metrics=gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active
extra=""
case $level in
  survey) base_sel=(--metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,launch__registers_per_thread)
    sel=("${base_sel[@]}") ;;
  sol)
    base_sel=(--section SpeedOfLight --section LaunchStats --section Occupancy --metrics "$sol_metrics")
    extra=$(pyrun -c 'from console.profiling.metric_names import sol_extra_metrics; print(",".join(sol_extra_metrics()))')
    sel=(--section SpeedOfLight --section LaunchStats --section Occupancy --metrics "$sol_metrics${extra:+,$extra}")
    ;;
  deep)
    base_sel=(--set full --import-source yes)
    extra=$("$NCU" --query-metrics 2>/dev/null | pyrun -m console.profiling.metric_names --known-from-stdin)
    sel=("${base_sel[@]}")
    [[ -z $extra ]] || sel+=(--metrics "$extra")
    ;;
esac

run_ncu() {  # run_ncu LOG REPORT ARGS... : profile the program, keep its output in LOG
  local log=$1 rep=$2; shift 2
  "$NCU" --target-processes all --clock-control none --force-overwrite --export "$rep" "${range[@]}" \
    "$@" "${filter[@]}" python3 "$file" "${args[@]}" >"$log" 2>&1
}

echo "$prog: level=$level ncu ${range[*]} ${sel[*]} ${filter[*]} python3 $file ${args[*]}" >&2
run_ncu "$outdir/ncu.log" "$outdir/ncu" "${sel[@]}"
rc=$?
if [[ $rc -ne 0 && -n $extra ]] && grep -qi "metric" "$outdir/ncu.log"; then
  # A counter this ncu version refuses must not cost the whole profile.
  echo "$prog: ncu refused the extra metrics, retrying without them" >&2
  run_ncu "$outdir/ncu.log" "$outdir/ncu" "${base_sel[@]}"
  rc=$?
fi
[[ $rc -eq 0 ]] || { tail -n 20 "$outdir/ncu.log" >&2; echo "$prog: ncu exited $rc" >&2; }
[[ -f $outdir/ncu.ncu-rep ]] || die "ncu wrote no report (see $outdir/ncu.log)"

export_page() {  # export_page REPORT OUT.csv ARGS...
  local rep=$1 out=$2; shift 2
  if "$NCU" --import "$rep" --csv --print-units base --print-kernel-base function "$@" >"$out.tmp" 2>"$out.err"; then
    mv "$out.tmp" "$out" && rm -f "$out.err"
  else
    rm -f "$out.tmp"; return 1
  fi
}
export_page "$outdir/ncu.ncu-rep" "$outdir/analysis/ncu_raw.csv" --page raw || die "ncu --import --page raw failed"
export_page "$outdir/ncu.ncu-rep" "$outdir/analysis/ncu_details.csv" --page details \
  || echo "$prog: details page export failed (kept going)" >&2

analyze=(--output-dir "$outdir" --level "$level" --program "$file")
[[ -z $top ]] || analyze+=(--top "$top")
[[ -z $diff ]] || analyze+=(--diff "$diff")
[[ -z $regex ]] || analyze+=(--kernel-regex "$regex")
[[ -z $kname ]] || analyze+=(--kernel-name "$kname")

if [[ $source -eq 1 ]]; then
  src_count=${count:-1}
  src_filter=("${filter[@]}")
  [[ -n $count ]] || src_filter+=(--launch-count 1)
  echo "$prog: source counters (launch-count $src_count)" >&2
  if "$NCU" --target-processes all --clock-control none --force-overwrite --export "$outdir/ncu_source" "${range[@]}" \
      --section SourceCounters --section WarpStateStats --import-source yes \
      "${src_filter[@]}" python3 "$file" "${args[@]}" >"$outdir/ncu_source.log" 2>&1 \
      && [[ -f $outdir/ncu_source.ncu-rep ]]; then
    export_page "$outdir/ncu_source.ncu-rep" "$outdir/analysis/source_sass.csv" --page source --print-source sass \
      || echo "$prog: SASS source page export failed" >&2
    export_page "$outdir/ncu_source.ncu-rep" "$outdir/analysis/source_cuda.csv" --page source --print-source cuda \
      || echo "$prog: CUDA source page export failed (no line info?)" >&2
  else
    tail -n 20 "$outdir/ncu_source.log" >&2
    echo "$prog: source-counter profile failed" >&2
  fi
  analyze+=(--source)
fi

pyrun -m console.profiling.funnel "${analyze[@]}"
status=$?
[[ $status -ne 0 ]] || [[ $rc -eq 0 ]] || status=1
exit $status
