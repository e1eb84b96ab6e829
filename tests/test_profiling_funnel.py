"""The profile funnel on real ncu 2025.3 CSV pages captured on an H200 (tests/fixtures/profiling)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
from pathlib import Path

import pytest

from console.formats import profile_summary_text as summary_text
from console.formats.profile_json import parse_profile_json, read_gateway_profile
from console.formats.profile_summary import read_profile_summary
from console.profiling import diagnosis, funnel
from console.profiling.ncu_csv import NcuCsvError, parse_details_page, parse_number, parse_raw_page
from console.profiling.result import load_profile_dir

ROOT = Path(__file__).resolve().parents[1]
FIX = ROOT / "tests" / "fixtures" / "profiling"
CASES = ["copy", "strided", "bank_conflict", "local_array", "small_grid", "tail", "fma", "good",
         "divergent", "fp64", "histogram"]
# The pattern each kernel was written to show (examples/ncu_patterns/cases.py).
SHOWS = {"copy": "_mem", "strided": "C", "bank_conflict": "H", "local_array": "K", "small_grid": "A",
         "tail": "B", "fma": "F", "divergent": "N", "fp64": "L", "histogram": "G"}
# What sol alone shows of each (real sol pages with the sol counters, captured on the H200).
SOL_SHOWS = {"copy": {"_mem"}, "strided": {"_mem", "C"}, "local_array": {"_mem", "K"}, "fma": {"F"}, "good": set(),
             "divergent": {"N"}, "fp64": {"L"}, "histogram": {"E", "G"}}


def _csv(case: str, level: str, page: str) -> str:
    return gzip.decompress((FIX / case / level / "analysis" / f"{page}.csv.gz").read_bytes()).decode()


def _assemble(tmp_path: Path, case: str, level: str, **kw) -> tuple[Path, dict]:
    """Re-run the funnel on a captured profile's CSV pages in a fresh directory."""
    out = tmp_path / case / level
    (out / "analysis").mkdir(parents=True)
    for gz in (FIX / case / level / "analysis").glob("*.csv.gz"):
        (out / "analysis" / gz.name[:-3]).write_bytes(gzip.decompress(gz.read_bytes()))
    source = (out / "analysis" / "source_sass.csv").exists()
    return out, funnel.assemble(str(out), level, source=source, **kw)


@pytest.fixture(scope="module")
def deep(tmp_path_factory):
    base = tmp_path_factory.mktemp("deep")
    return {c: _assemble(base, c, "deep") for c in CASES}


def test_numbers_as_ncu_prints_them():
    assert parse_number("1,234,567.5") == 1234567.5
    assert parse_number("n/a") is None and parse_number("") is None and parse_number("-") is None
    assert parse_number("12.5%") == 12.5 and parse_number("(256, 1, 1)") is None
    assert parse_number("1e-05") == 1e-05


def test_raw_page_reads_units_row_ids_and_every_metric():
    launches = parse_raw_page(_csv("good", "deep", "ncu_raw"))
    (launch,) = launches
    assert launch.kernel.startswith("nvjet_sm90") and launch.block == (384, 1, 1)
    assert launch.units["gpu__time_duration.sum"] == "ns"
    assert launch.number("gpu__time_duration.sum") > 10_000
    assert len(launch.values) > 2000


def test_survey_lists_every_kernel_sorted_by_duration(tmp_path):
    _, doc = _assemble(tmp_path, "copy", "survey")
    names = [k["name"] for k in doc["kernels"]]
    assert "copy_f32" in names and doc["kernel_count"] == len(names) >= 2
    durations = [k["duration"] for k in doc["kernels"]]
    assert durations == sorted(durations, reverse=True) and all(d > 0 for d in durations)
    assert doc["dominant_kernel"] == "copy_f32" and doc["kernels_omitted"] == 0
    assert all(k["compute_sol_pct"] is None and k["bound"] is None for k in doc["kernels"])
    _, top1 = _assemble(tmp_path / "t", "copy", "survey", top=1)
    assert len(top1["kernels"]) == 1 and top1["kernels_omitted"] == doc["kernel_count"] - 1


def test_sol_fills_the_profile_json_contract(tmp_path):
    out, doc = _assemble(tmp_path, "copy", "sol")
    assert doc["profiler"] == "ncu" and doc["level"] == "sol"
    (k,) = doc["kernels"]
    assert k["name"] == "copy_f32" and k["duration_unit"] == "ns" and k["bound"] == "memory"
    for key in ("compute_sol_pct", "mem_sol_pct", "dram_pct", "occupancy_pct"):
        assert 0 < k[key] <= 100
    assert k["dram_pct"] > 60 and k["metrics"]["grid_size"] == 2112
    assert doc["total_duration_us"] == pytest.approx(k["duration"] / 1000, rel=1e-3)
    metrics_key = json.loads((out / "analysis" / "metrics_key_run.json").read_text())
    # sol reads the tensor pipe too (pattern F needs it): a copy leaves it idle
    assert metrics_key["episcope"]["kernels"][0]["key_metrics"]["tensor_pct"] < 1


def test_kernel_sha256_is_the_file_the_profile_was_taken_on(tmp_path):
    kernel = tmp_path / "kernel.py"
    kernel.write_text("def kernel(x):\n    return x\n")
    _, doc = _assemble(tmp_path, "copy", "sol", kernel_file=str(kernel))
    import hashlib

    assert doc["kernel_sha256"] == hashlib.sha256(kernel.read_bytes()).hexdigest()
    _, none = _assemble(tmp_path / "n", "copy", "sol", kernel_file=str(tmp_path / "absent.py"))
    assert none["kernel_sha256"] is None


@pytest.mark.parametrize("case", sorted(SHOWS))
def test_each_pattern_fires_on_the_kernel_built_to_show_it(deep, case):
    _, doc = deep[case]
    ids = {d["id"] for d in doc["kernels"][0]["diagnostics"]}
    assert SHOWS[case] in ids
    pattern = next(d for d in doc["kernels"][0]["diagnostics"] if d["id"] == SHOWS[case])
    assert pattern["severity"] in diagnosis.SEVERITIES and pattern["evidence"]


def test_no_pattern_fires_on_the_tensor_core_gemm(deep):
    _, doc = deep["good"]
    (k,) = doc["kernels"]
    assert k["diagnostics"] == [] and k["bound"] == "compute" and k["metrics"]["tensor_pct"] > 80


@pytest.mark.parametrize("pid", sorted(set(SHOWS.values())))
def test_patterns_do_not_fire_where_their_cause_is_absent(deep, pid):
    owners = {c for c, p in SHOWS.items() if p == pid}
    # strided also reads from DRAM at peak; bank_conflict saturates the shared pipe (memory).
    also = {"_mem": {"strided", "bank_conflict"}, "F": {"tail"}}.get(pid, set())
    for case, (_, doc) in deep.items():
        if case in owners | also:
            continue
        assert pid not in {d["id"] for d in doc["kernels"][0]["diagnostics"]}, case


def test_unknown_metrics_never_fire_a_pattern():
    assert diagnosis.diagnose({}) == []
    assert diagnosis.diagnose({"compute_sol_pct": 90.0}) == []


def test_summary_layout_round_trips(deep):
    out, doc = deep["local_array"]
    text = (out / "summary.txt").read_text()
    lines = text.splitlines()
    assert lines[0] == "===== NCU Profile Summary =====" and lines[1] == "Kernel: local_array"
    for label in ("Duration:", "Grid:", "SM Throughput:", "Memory Throughput:", "L2 Hit Rate:", "Achieved Occupancy:",
                  "Tensor Core Utilization:", "FP64 Pipe Utilization:", "Registers/Thread:", "Local Ld/St:",
                  "Top Stall Reasons:"):
        assert any(l.startswith(label) for l in lines), label
    assert "===== Diagnosis =====" in lines and "===== Suggested Queries =====" in lines
    parsed = summary_text.parse(text)
    k = doc["kernels"][0]
    assert parsed["kernel"] == "local_array"
    assert parsed["duration_us"] == pytest.approx(k["duration"] / 1000, abs=0.01)
    assert [p[0] for p in parsed["patterns"]] == [d["id"] for d in k["diagnostics"]]
    assert parsed["patterns"][0][3] == tuple(k["diagnostics"][0]["evidence"])
    assert parsed["symptoms"] == doc["symptoms"] == ["pipeline-stalls", "register-pressure"]
    stalls = [s[0] for s in parsed["stalls"]]
    assert len(stalls) <= 5 and stalls[:2] == ["lg_throttle", "long_scoreboard"]
    again = summary_text.render(k, k["diagnostics"], parsed["symptoms"], parsed["localize"], parsed["stalls"],
                                parsed["queries"])
    assert again == text


def test_summary_without_patterns_says_so(deep):
    out, _ = deep["good"]
    parsed = summary_text.parse((out / "summary.txt").read_text())
    assert parsed["no_patterns"] and parsed["patterns"] == [] and parsed["symptoms"] == []


def test_localize_lists_only_files_that_exist(deep, tmp_path):
    out, doc = deep["strided"]
    assert doc["localize"] == ["analysis/source_metrics_line_run.txt", "analysis/warp_stalls_line_run.txt"]
    assert all((out / rel).is_file() for rel in doc["localize"])
    _, no_source = deep["copy"]  # memory-bound too, but profiled without --source
    assert no_source["symptoms"] == ["memory-bound"] and no_source["localize"] == []
    assert diagnosis.localize(["compute-bound", "register-pressure"], out) == ["analysis/warp_stalls_line_run.txt",
                                                                              "analysis/disasm_run.txt"]


def test_source_evidence_from_the_sass_page(deep):
    out, _ = deep["strided"]
    manifest = json.loads((out / "analysis" / "source_evidence_manifest.json").read_text())
    assert manifest["schema"] == "v1"
    assert {e["name"]: e["status"] for e in manifest["evidence"]} == {
        "warp_stalls_line_run": "ok", "source_metrics_line_run": "ok", "disasm_run": "ok"}
    stalls = json.loads((out / "analysis" / "warp_stalls_line_run.json").read_text())
    assert stalls["total_samples"] > 0 and stalls["rows"][0]["counters"]["stall_long_sb"] > 0
    metrics = json.loads((out / "analysis" / "source_metrics_line_run.json").read_text())
    top = metrics["rows"][0]
    assert top["source"].startswith("LDG") and top["counters"]["L2 Theoretical Sectors Global Excessive"] > 0
    assert not (deep["copy"][0] / "analysis" / "source_evidence_manifest.json").exists()


def test_source_evidence_marks_missing_pages(tmp_path):
    from console.profiling import source_evidence

    (tmp_path / "analysis").mkdir()
    (tmp_path / "analysis" / "bad.csv").write_text("==WARNING== Unable to open source file x.cu\n")
    manifest = source_evidence.build(str(tmp_path), str(tmp_path / "analysis" / "none.csv"),
                                     str(tmp_path / "analysis" / "bad.csv"))
    assert {e["status"] for e in manifest["evidence"]} == {"missing"}
    skipped = source_evidence.build(str(tmp_path), None, None, requested=False)
    assert {e["status"] for e in skipped["evidence"]} == {"skipped"}


def test_details_page_rules_and_a_broken_page():
    (launch,) = parse_details_page(_csv("tail", "deep", "ncu_details"))
    assert launch.kernel == "fma_tail" and launch.rules
    assert any("wave" in r["description"].lower() for r in launch.rules)
    with pytest.raises(NcuCsvError):
        parse_raw_page("==PROF== nothing here\n")


def test_diff_against_an_earlier_profile(tmp_path):
    before, _ = _assemble(tmp_path, "copy", "sol")
    out, doc = _assemble(tmp_path / "again", "copy", "deep", diff_dir=str(before))
    (row,) = doc["diff"]["kernels"]
    assert row["name"] == "copy_f32" and row["speedup"] > 0 and row["duration_before"] > 0
    assert (out / "analysis" / "diff_run.txt").read_text().startswith("Diff against")


def test_console_readers_on_captured_outputs():
    doc = read_gateway_profile(FIX / "tail" / "deep" / "gateway_profile.json").value
    assert doc.level == "deep" and doc.kernels[0].name == "fma_tail" and "B" in [d.get("id") for d in doc.kernels[0].diagnostics]
    assert doc.kernels[0].duration_ns > 0
    summary = read_profile_summary(FIX / "tail" / "deep" / "summary.txt").value
    assert summary.kernel == "fma_tail" and summary.patterns[0][0] == "B" and summary.symptoms
    assert read_gateway_profile(FIX / "nope.json").value is None
    legacy = {"profiler": "ncu", "level": "sol", "kernels": [{"name": "k", "duration": 2.5, "duration_unit": "us"}]}
    old = parse_profile_json(legacy)
    assert old.kernels[0].duration_ns == 2500 and old.kernel_count is None and old.kernels[0].bound is None


def test_load_profile_dir(tmp_path):
    result, problems = load_profile_dir(FIX / "bank_conflict" / "deep")
    assert problems == () and result.level == "deep" and result.bottleneck == "memory"
    assert ("H", "high") in {(p[0], p[1]) for p in result.patterns}
    assert result.stalls[0][0] == "mio_throttle"
    assert result.localize and all((FIX / "bank_conflict" / "deep" / r).is_file() for r in result.localize)
    assert load_profile_dir(tmp_path) == (None, ())
    (tmp_path / "gateway_profile.json").write_text("{broken")
    (tmp_path / "summary.txt").write_text(summary_text.render(None, [], [], [], [], []))
    result, problems = load_profile_dir(tmp_path)
    assert len(problems) == 1 and "invalid JSON" in problems[0].error and result.level is None


def test_tool_refuses_deep_without_a_kernel_filter(tmp_path):
    proc = subprocess.run([str(ROOT / "tools" / "profile_nvidia.sh"), str(ROOT / "examples" / "ncu_patterns" / "cases.py"),
                           "--output-dir", str(tmp_path / "x")], env=dict(os.environ, PROFILE_LEVEL="deep"),
                          capture_output=True, text=True, timeout=30)
    assert proc.returncode == 2 and "PROFILE_KERNEL_REGEX" in proc.stderr
    bad = subprocess.run([str(ROOT / "tools" / "profile_nvidia.sh"), "nope.py", "--output-dir", "x"],
                         capture_output=True, text=True, timeout=30)
    assert bad.returncode == 2 and "no such file" in bad.stderr


def test_naive_row_softmax_diagnosis(tmp_path):
    # one thread per row: 32 blocks on 132 SMs, each lane walks its own row (stride = cols)
    _, doc = _assemble(tmp_path, "softmax_naive", "deep")
    (k,) = doc["kernels"]
    assert k["name"] == "row_softmax_naive" and k["bound"] == "memory"
    assert {"A", "C", "D"} <= {d["id"] for d in k["diagnostics"]}
    assert doc["symptoms"] == ["low-sm-utilization", "memory-bound"]


@pytest.mark.parametrize("case", sorted(SOL_SHOWS))
def test_sol_sees_divergence_fp64_atomics_spills_and_uncoalesced_access(tmp_path, case):
    out, doc = _assemble(tmp_path, case, "sol")
    k = next(k for k in doc["kernels"] if k["name"] == doc["dominant_kernel"])
    assert {d["id"] for d in k["diagnostics"]} == SOL_SHOWS[case]
    # a named pattern gives LOCALIZE a hint at sol: the deep --source files that would show it
    assert bool(doc["localize"]) == bool(doc["symptoms"])
    assert all(h.startswith(diagnosis.DEEP_SOURCE_HINT + "analysis/") for h in doc["localize"])
    parsed = summary_text.parse((out / "summary.txt").read_text())
    assert parsed["localize"] == doc["localize"] and parsed["symptoms"] == doc["symptoms"]


def test_fp64_pipe_is_shown_and_f_gives_way_to_the_real_limit(tmp_path):
    out, doc = _assemble(tmp_path, "fp64", "sol")
    (k,) = doc["kernels"]
    assert k["metrics"]["fp64_pipe_pct"] > 95 and k["metrics"]["fma_pipe_pct"] < 5
    assert "FP64 Pipe Utilization: 98.9%" in (out / "summary.txt").read_text().splitlines()
    (l_pattern,) = k["diagnostics"]
    assert l_pattern["id"] == "L" and l_pattern["severity"] == "high" and "fp64 pipe 98.9%" in l_pattern["evidence"][0]
    # the divergent kernel keeps the FMA pipe 85% busy for one lane in 32: N, not "use tensor cores"
    _, div = _assemble(tmp_path / "d", "divergent", "sol")
    assert [d["id"] for d in div["kernels"][0]["diagnostics"]] == ["N"]
    # the same counters with divergence and fp64 removed: F stands
    m = dict(div["kernels"][0]["metrics"], threads_per_inst=32.0)
    assert "F" in {p.id for p in diagnosis.diagnose(m)}
    assert "F" not in {p.id for p in diagnosis.diagnose(dict(m, fp64_pipe_pct=90.0))}


def test_deep_sees_the_new_cases_with_instruction_counts(deep):
    for case, pid in (("divergent", "N"), ("fp64", "L"), ("histogram", "G")):
        _, doc = deep[case]
        ids = [d["id"] for d in doc["kernels"][0]["diagnostics"]]
        assert pid in ids and "F" not in ids, (case, ids)


@pytest.mark.parametrize("level", ["survey", "sol", "deep"])
def test_queries_name_only_files_that_come_back_from_the_sandbox(tmp_path, level):
    out, doc = _assemble(tmp_path, "strided", level)
    queries = summary_text.parse((out / "summary.txt").read_text())["queries"]
    assert queries and not any(".ncu-rep" in q for q in queries)
    for q in queries:
        for word in q.replace("'", " ").split():
            if word.startswith(str(out)) and not word.endswith(("-sol", "-deep")):
                assert Path(word).is_file(), (q, word)


def test_sol_asks_ncu_only_for_counters_the_h200_reported():
    """Every sol counter is in the real sol raw pages (ncu 2025.3 on the H200 accepted them)."""
    from console.profiling.metric_names import sol_extra_metrics

    header = _csv("fp64", "sol", "ncu_raw").splitlines()[0]
    assert all(f'"{name}"' in header for name in sol_extra_metrics())
