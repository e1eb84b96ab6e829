#!/usr/bin/env bash
# Profile every pattern case (and the row_softmax kernels) at the three funnel levels on a GPU
# machine, then pack the profile directories (CSV exports and outputs, no .ncu-rep) into one
# tarball: `examples/ncu_patterns/capture.sh WORKDIR TARBALL [all|softmax]`. Run from the
# repository root; `softmax` profiles only the row_softmax kernels.
set -uo pipefail
work=${1:?usage: capture.sh WORKDIR TARBALL}
tarball=${2:?usage: capture.sh WORKDIR TARBALL}
mkdir -p "$work"
cases=examples/ncu_patterns/cases.py
tool=tools/profile_nvidia.sh
log="$work/capture.log"
{ nvidia-smi -L; ncu --version; } >"$work/env.txt" 2>&1
ncu --query-metrics >"$work/query_metrics.txt" 2>&1 || true

prof() {  # prof NAME LEVEL REGEX ARGS... : one profile directory, its console output kept
  local name=$1 level=$2 regex=$3; shift 3
  local t0=$SECONDS
  PROFILE_LEVEL=$level PROFILE_KERNEL_REGEX=$regex timeout 120 "$tool" "$@" \
    >"$work/$name.out" 2>&1
  echo "$name rc=$? ${level} $((SECONDS - t0))s" | tee -a "$log"
}

only=${3:-all}
[[ $only == softmax ]] && pattern_cases=() || pattern_cases=(copy strided bank_conflict local_array small_grid tail fma good)
for case in "${pattern_cases[@]}"; do
  regex=$(python3 "$cases" --regex "$case")
  prof "$case-survey" survey "" "$cases" --output-dir "$work/$case/survey" -- --case "$case"
  prof "$case-sol" sol "$regex" "$cases" --output-dir "$work/$case/sol" --launch-skip 1 --launch-count 1 -- --case "$case"
  extra=()
  case $case in strided|bank_conflict) extra=(--source) ;; esac
  prof "$case-deep" deep "$regex" "$cases" --output-dir "$work/$case/deep" --launch-skip 1 --launch-count 1 \
    "${extra[@]}" -- --case "$case"
done
# the diff against an earlier profile: fma deep against the tail deep is a different kernel,
# so compare sol of copy with itself re-profiled
[[ $only == softmax ]] || prof copy-sol-diff sol "^copy_f32$" "$cases" --output-dir "$work/copy/sol_again" --launch-skip 1 --launch-count 1 \
  --diff "$work/copy/sol" -- --case copy

problem=examples/problems/row_softmax
if [[ -d $problem ]]; then
  for k in naive fast; do
    prof "softmax_$k-sol" sol "^row_softmax" examples/ncu_patterns/softmax_harness.py \
      --output-dir "$work/softmax_$k/sol" --launch-skip 1 --launch-count 1 -- "$problem/kernel_$k.py"
    prof "softmax_$k-deep" deep "^row_softmax" examples/ncu_patterns/softmax_harness.py \
      --output-dir "$work/softmax_$k/deep" --launch-skip 1 --launch-count 1 --source -- "$problem/kernel_$k.py"
  done
fi

find "$work" -name "*.ncu-rep" -delete
gzip -f "$work/query_metrics.txt"
tar czf "$tarball" -C "$work" .
