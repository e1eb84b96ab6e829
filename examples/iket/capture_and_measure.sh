#!/usr/bin/env bash
# Capture the IKeT example under run-iket, export it, and measure the profiler's overhead.
# Usage (repository root, GPU machine, run-iket on PATH): examples/iket/capture_and_measure.sh OUT_DIR
# OUT_DIR receives iket.tgz (capture attempt + export + measurement) and the logs.
set -u
out=${1:?output directory}
work=$(mktemp -d)
tool="python3 skills/autonomous-gpu-kernel-timeline/scripts/timeline.py"
example=examples/iket/elementwise_add.py
export PYTHONUNBUFFERED=1

{ run-iket --help; run-iket profile --help; } >"$out/run-iket-help.txt" 2>&1

# One launch, no warm-up: a small, complete trace (128 CTAs x 8 warps).
ATREX_TIMELINE_WARMUP=0 ATREX_TIMELINE_ITERATIONS=1 \
  $tool capture-iket --output-dir "$work/capture" --timeout 150 -- python3 "$example" \
  >"$out/capture.stdout" 2>"$out/capture.stderr"
echo "capture-iket exit $?"
cat "$out/capture.stdout" "$out/capture.stderr"
attempt=$(ls -d "$work"/capture/attempt-* | head -1)

# Overhead: plain run (IKeT ops stripped at JIT time) vs the whole run-iket profile
# (tracker pass + profiled pass; only the profiled pass prints its sample).
measure_dir=$(mktemp -d)
timeout 200 $tool measure \
  --baseline-command "[\"python3\", \"$example\"]" \
  --instrumented-command "[\"run-iket\", \"--output-dir\", \"$measure_dir/profile\", \"--clobber\", \"profile\", \"--postprocess\", \"none\", \"--\", \"python3\", \"$example\"]" \
  --baseline-source "$example" --instrumented-source "$example" --timeout 90 \
  --output "$work/measurement.json" >"$out/measure.stdout" 2>"$out/measure.stderr"
echo "measure exit $?"
cat "$out/measure.stdout" "$out/measure.stderr"

$tool export-iket --run-dir "$attempt" --kernel-regex '.*add_kernel.*' \
  --dictionary examples/iket/elementwise_add.events.json --clean-source "$example" \
  --instrumented-source "$example" --workload-identity "elementwise_add:fp32:32x1024:block256" \
  --correctness passed --measurement "$work/measurement.json" \
  --interval "load -> store" --output-dir "$work/export" >"$out/export.stdout" 2>"$out/export.stderr"
echo "export-iket exit $?"
cat "$out/export.stdout" "$out/export.stderr"

find "$work" -type f -printf '%s %p\n' | sort -n | tail -40
tar czf "$out/iket.tgz" -C "$work" .
ls -la "$out"
