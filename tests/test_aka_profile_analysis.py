"""analysis/metrics_key_run.json in AKA's layout, the documented differences of the two
diagnoses on the real H200 captures, and AKA's patterns shown beside episcope's (what AKA's
classify_ncu.py said is a fixture: tests/fixtures/aka/README.md)."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from console.episode.replay import Recorder, Replay, load_recording
from console.episode.session import Session
from console.episode.summary import status_document
from console.profiling import aka_diagnosis, funnel
from console.profiling.result import load_profile_dir
from console_fixture import build_episode

ROOT = Path(__file__).resolve().parents[1]
CAPTURES = ROOT / "tests" / "fixtures" / "profiling"
AKA = json.loads((ROOT / "tests" / "fixtures" / "aka" / "classify_ncu_on_episcope.json").read_text())["captures"]
REFERENCE = ROOT / "skills" / "gpu-kernel-episode-loop" / "references" / "diagnosis-vs-aka.md"


def _assemble(tmp_path: Path, capture: str) -> tuple[Path, dict]:
    case, level_dir = capture.split("/")
    out = tmp_path / case / level_dir
    (out / "analysis").mkdir(parents=True)
    for gz in (CAPTURES / case / level_dir / "analysis").glob("*.csv.gz"):
        (out / "analysis" / gz.name[:-3]).write_bytes(gzip.decompress(gz.read_bytes()))
    level = "sol" if level_dir.startswith("sol") else level_dir
    return out, funnel.assemble(str(out), level, source=(out / "analysis" / "source_sass.csv").exists())


@pytest.mark.parametrize("capture", sorted(AKA))
def test_metrics_key_is_flat_ncu_names_and_the_documented_diagnosis_holds(capture, tmp_path):
    out, doc = _assemble(tmp_path, capture)
    key = json.loads((out / "analysis" / "metrics_key_run.json").read_text())
    focus = next(k for k in doc["kernels"] if k["name"] == doc["dominant_kernel"])
    assert key["__kernel_name__"] == focus["name"]
    # AKA's classifier and summary read these by their ncu names.
    assert key["gpu__time_duration.sum"] == pytest.approx(focus["duration"], rel=1e-3)
    assert key["sm__throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(focus["compute_sol_pct"], abs=0.01)
    assert key["gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"] == pytest.approx(focus["mem_sol_pct"], abs=0.01)
    assert [k["name"] for k in key["episcope"]["kernels"]] and key["episcope"]["level"] == doc["level"]
    assert sorted(d["id"] for d in focus.get("diagnostics") or []) == AKA[capture]["episcope"]


def test_the_reference_table_is_what_both_tools_said():
    text = REFERENCE.read_text()
    for capture, both in AKA.items():
        mark = "" if both["aka"] == both["episcope"] else " ≠"
        row = f"| `{capture}`{mark} | {' '.join(both['episcope']) or '—'} | {' '.join(both['aka']) or '—'} |"
        assert row in text, row


# AKA's patterns beside episcope's: what AKA's classify_ncu.py printed (--json) is the fixture.

CLASSIFY = ROOT / "tests" / "fixtures" / "aka" / "classify_ncu"
PRINTED = sorted(f"{p.parent.name}/{p.stem}" for p in (CLASSIFY / "captures").glob("*/*.json"))


def _akas(printed: dict) -> list[dict]:
    return [{"id": f["pattern"], "confidence": f["confidence"], "label": f["label"], "evidence": f["evidence"]}
            for f in printed["findings"]]


def test_akas_output_was_kept_for_every_capture():
    captures = sorted(f"{d.parent.name}/{d.name}" for d in CAPTURES.glob("*/*") if (d / "analysis" / "ncu_raw.csv.gz").is_file())
    assert PRINTED == captures and len(PRINTED) == 36
    for capture, both in AKA.items():  # the earlier fixture agrees with the kept outputs
        printed = json.loads((CLASSIFY / "captures" / f"{capture}.json").read_text())
        assert sorted(f["pattern"] for f in printed["findings"]) == both["aka"]


@pytest.mark.parametrize("capture", PRINTED)
def test_profile_shows_the_patterns_akas_classifier_printed(capture, tmp_path):
    out, _ = _assemble(tmp_path, capture)
    result, problems = load_profile_dir(out)
    assert problems == () and result.aka_patterns_unknown is None
    printed = json.loads((CLASSIFY / "captures" / f"{capture}.json").read_text())
    assert [p.to_json() for p in result.aka_patterns] == _akas(printed)
    # the committed capture holds the metrics file the funnel writes (after a change to it, re-run
    # python3 -m console.profiling.funnel on a copy with the CSVs unzipped and copy the file back)
    kept = CAPTURES / capture / "analysis" / "metrics_key_run.json"
    assert json.loads(kept.read_text()) == json.loads((out / "analysis" / "metrics_key_run.json").read_text())
    result, problems = load_profile_dir(CAPTURES / capture)
    assert problems == () and [p.to_json() for p in result.aka_patterns] == _akas(printed)


EDGES = json.loads((CLASSIFY / "edge_cases.json").read_text())


@pytest.mark.parametrize("case", sorted(EDGES))
def test_thresholds_and_missing_values_as_akas_classifier_reads_them(case):
    assert [p.to_json() for p in aka_diagnosis.classify(EDGES[case]["metrics"])] == _akas(EDGES[case]["aka"])


def test_non_finite_values_never_stop_the_reading():
    names = [v for k, v in vars(aka_diagnosis).items() if k.isupper() and isinstance(v, str) and "__" in v]
    for value in (math.nan, math.inf, -math.inf, "1e400"):
        patterns = aka_diagnosis.classify({aka_diagnosis.KERNEL_KEY: "k", **dict.fromkeys(names, value)})
        assert all(p.evidence for p in patterns)
    spilled = aka_diagnosis.classify({aka_diagnosis.LOCAL_LD: math.inf, aka_diagnosis.REGISTERS: math.nan})
    assert [p.evidence for p in spilled] == ["local_ld=inf, local_st=0, regs/thread=nan"]


def _profile_dir(tmp_path: Path, metrics: bytes | None) -> Path:
    out = tmp_path / "profile"
    out.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "fixtures" / "aka" / "profiles" / "job_record" / "gateway_profile.json", out)
    if metrics is not None:
        (out / "analysis").mkdir()
        (out / "analysis" / "metrics_key_run.json").write_bytes(metrics)
    return out


def _older_layout(out: Path) -> Path:
    """The copy/sol capture as an older episcope wrote it: its per-kernel view at the top of
    metrics_key_run.json (schema v1), no AKA metric names, no ``__kernel_name__``."""
    shutil.copytree(CAPTURES / "copy" / "sol", out)
    flat = json.loads((out / "analysis" / "metrics_key_run.json").read_text())
    (out / "analysis" / "metrics_key_run.json").write_text(json.dumps({**flat["episcope"], "schema": "v1"}))
    return out


def test_why_akas_patterns_are_unknown(tmp_path):
    # AKA's gateway profile record (its sandbox syncs no metrics file): unknown, and why
    result, problems = load_profile_dir(_profile_dir(tmp_path / "none", None))
    assert problems == () and result.aka_patterns is None
    assert result.aka_patterns_unknown == "no analysis/metrics_key_run.json"
    # a profile an older episcope took: its metrics file is not AKA's flat layout
    result, problems = load_profile_dir(_older_layout(tmp_path / "older"))
    assert problems == () and result.aka_patterns is None and "not in AKA's flat layout" in result.aka_patterns_unknown
    assert [p[0] for p in result.patterns] == ["_mem"]  # episcope's own diagnosis still reads
    # a broken file: a problem naming it, the profile itself still read
    result, problems = load_profile_dir(_profile_dir(tmp_path / "broken", b'{"__kernel_name__": '))
    (problem,) = problems
    assert problem.path.endswith("analysis/metrics_key_run.json") and result.kernels
    assert result.aka_patterns is None and result.aka_patterns_unknown.startswith("analysis/metrics_key_run.json is unreadable: ")
    result, problems = load_profile_dir(_profile_dir(tmp_path / "list", b"[1, 2]"))
    assert result.aka_patterns is None and "must be an object" in problems[0].error


def test_akas_patterns_are_in_status_and_replay(tmp_path):
    campaign, worktree = build_episode(tmp_path / "ws")
    profiles = worktree / "profiles" / "episode_1"
    _assemble(profiles, "copy/deep")
    shutil.copytree(ROOT / "tests" / "fixtures" / "aka" / "profiles" / "job_record", profiles / "aka")
    recording = tmp_path / "recording.jsonl"
    recorder = Recorder(recording, campaign_root=str(campaign), campaign="demo", worktree=str(worktree))
    live = Session(campaign, on_event=recorder.record).scan()
    recorder.close()
    doc = status_document(live, now=0.0)
    by_dir = {Path(p["dir"]).relative_to(profiles).as_posix(): p for p in doc["profiles"]}
    printed = json.loads((CLASSIFY / "captures" / "copy" / "deep.json").read_text())
    deep = by_dir["copy/deep"]
    assert deep["aka_patterns"] == _akas(printed) and deep["aka_patterns_unknown"] is None
    assert [p["id"] for p in deep["patterns"]] == ["_mem"]  # episcope's own, beside AKA's E and M
    assert by_dir["aka"]["aka_patterns"] is None and by_dir["aka"]["aka_patterns_unknown"] == "no analysis/metrics_key_run.json"
    _, events, problems = load_recording(recording)
    assert problems == []
    replayed = Replay(events)
    replayed.seek_index(replayed.total)
    assert replayed.state().profiles == live.profiles
    assert status_document(replayed.state(), now=0.0)["profiles"] == doc["profiles"]


def test_the_funnel_detail_draws_akas_patterns_under_episcopes(tmp_path):
    from widgets.profile_funnel import ProfileFunnel

    out, _ = _assemble(tmp_path, "copy/deep")
    result, _ = load_profile_dir(out)
    lines = ProfileFunnel.detail(result, None).plain.splitlines()
    mine = next(i for i, line in enumerate(lines) if line.startswith("_mem "))
    assert lines[mine + 1] == ("AKA E Latency-bound (long-scoreboard), "
                               "M Pipeline bubbles (no compute/memory overlap)")
    unknown, _ = load_profile_dir(_older_layout(tmp_path / "older"))
    assert not any(line.startswith("AKA ") for line in ProfileFunnel.detail(unknown, None).plain.splitlines())
