"""The human ``episcope status`` says what ``status --json`` says, on campaigns AKA's own code
wrote (tests/fixtures/aka/): AKA's phase measurement and reason codes, each version's quality
gate, and the campaign's episodes, in short lines; agent-written text made visible."""

from __future__ import annotations

import json
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from console.episode.session import Session
from console.episode.status_text import render_status
from console.episode.summary import status_document

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "aka"
REPO = Path(__file__).resolve().parent.parent
WIDTH = 80


def _document(path: Path, cache: Path) -> dict:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_CACHE_HOME", str(cache))
        return status_document(Session(str(path)).scan(), now=0.0)


@pytest.fixture(scope="module")
def idle(tmp_path_factory) -> tuple[dict, list[str]]:
    doc = _document(FIXTURES / "campaign_idle.tar.gz", tmp_path_factory.mktemp("cache"))
    return doc, render_status(doc).splitlines()


@pytest.fixture(scope="module")
def inflight(tmp_path_factory) -> tuple[dict, list[str]]:
    doc = _document(FIXTURES / "campaign_inflight.tar.gz", tmp_path_factory.mktemp("cache"))
    return doc, render_status(doc).splitlines()


def _block(lines: list[str], heading: str) -> list[str]:
    """The indented lines under ``heading``."""
    start = lines.index(heading) + 1
    end = next((i for i in range(start, len(lines)) if not lines[i].startswith(" ")), len(lines))
    return lines[start:end]


def test_an_open_phase_is_unavailable_with_akas_reason_code(inflight):
    doc, lines = inflight
    assert doc["phases"]["benchmark"]["measurement"] == "unavailable"
    assert doc["phase_timing"]["reason_codes"] == ["unclosed_phase"]
    assert "phases    measurement partial  reasons unclosed_phase" in lines
    (benchmark,) = [line for line in lines if line.startswith("  benchmark ")]
    assert benchmark.split() == ["benchmark", "unknown", "x0", "unavailable"]
    assert not any("(partial)" in line for line in lines)


def test_a_broken_sequence_names_akas_code_not_episcopes(idle):
    doc, lines = idle
    assert doc["phase_timing"]["reason_codes"] == ["orphan_phase_end"]
    assert "phases    measurement partial  reasons orphan_phase_end" in lines
    (research,) = [line for line in lines if line.startswith("  research ")]
    assert research.endswith(f"x{doc['phases']['research']['intervals']}  partial")


def test_a_rejected_version_shows_its_failed_gate_and_why(idle):
    doc, lines = idle
    (v2,) = [v for v in doc["versions"] if v["version"] == 2]
    assert v2["quality_gate"]["result"] == "FAIL" and v2["accepted"] is False
    at = next(i for i, line in enumerate(lines) if line.startswith("  v2 "))
    assert lines[at].endswith("correctness PASS  gate FAIL")
    assert lines[at + 1].strip() == v2["quality_gate"]["failure_reason"]
    (v1,) = [line for line in lines if line.startswith("  v1 ")]
    assert v1.endswith("gate PASS")


def test_the_episodes_block_is_the_campaign_history(idle):
    doc, lines = idle
    assert [(r["episode"], r["accepted"], r["gate"]) for r in doc["episodes"]] == [(1, True, "PASS"), (2, False, "FAIL")]
    assert _block(lines, "episodes") == [
        "  e0001 archived v1   candidate_ready  accepted  gate PASS  improvement 41.49 %",
        "  e0002 archived v2   candidate_ready  rejected  gate FAIL  improvement -63.68 %",
        "        measurement partial  reasons orphan_phase_end",
    ]


def test_a_running_episode_is_where_its_supervisor_says(inflight):
    doc, lines = inflight
    live = doc["episodes"][-1]
    assert live["source"] == "live" and live["status"] is None and live["phase"] == "exploring"
    assert _block(lines, "episodes") == [
        "  e0001 archived v1   candidate_ready  accepted  gate PASS  improvement 33.53 %",
        "  e0002 live     v2   phase exploring  accepted unknown  gate unknown",
        "        measurement partial  reasons unclosed_phase",
    ]


@pytest.mark.parametrize("name", ["idle", "inflight"])
def test_the_new_lines_fit_80_columns(name, request):
    _, lines = request.getfixturevalue(name)
    ours = [line for line in lines if line.startswith(("phases", "  v", "episodes", "  e0", "        measurement"))]
    assert ours and all(len(line) <= WIDTH for line in ours), [line for line in ours if len(line) > WIDTH]


def test_an_episode_without_telemetry_says_why_its_measurement_is_unknown(tmp_path):
    root = tmp_path / "campaign"
    root.mkdir()
    with tarfile.open(FIXTURES / "campaign_idle.tar.gz") as tar:
        tar.extractall(root, filter="data")
    (telemetry,) = root.glob("*/.atrex_long_horizon/episodes/e0002/episode_runtime/telemetry.jsonl")
    telemetry.unlink()
    doc = _document(telemetry.parents[4], tmp_path / "cache")
    lines = render_status(doc).splitlines()
    reason = doc["unknown"]["phase_timing"]
    assert doc["phase_timing"] is None and reason == "no telemetry.jsonl in episodes/e0002/episode_runtime/"
    assert f"phases    measurement unknown ({reason})" in lines
    assert _block(lines, "episodes")[-1] == f"        measurement unknown ({reason})"


def test_phases_that_are_null_say_why():
    """``phases`` is null where no telemetry file was read (README): the text gives the JSON's reason."""
    doc = json.loads(json.dumps(_minimal_document()))
    doc["phases"], doc["unknown"]["phases"] = None, "no telemetry.jsonl in episodes/e0001/episode_runtime/"
    lines = render_status(doc).splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("phases "))
    assert lines[at + 1] == "  unknown (no telemetry.jsonl in episodes/e0001/episode_runtime/)"


def _minimal_document() -> dict:
    from console.episode.state import EpisodeState

    return status_document(EpisodeState(campaign="c", campaign_root="/c"), now=0.0)


def test_a_failure_reason_with_control_characters_is_made_visible(tmp_path):
    root = tmp_path / "campaign"
    root.mkdir()
    with tarfile.open(FIXTURES / "campaign_idle.tar.gz") as tar:
        tar.extractall(root, filter="data")
    (memory,) = root.glob("*/memory/v2.json")
    version = json.loads(memory.read_text())
    version["quality_gate"]["failure_reason"] = "\x1b]0;owned\x07 gate \u202eFAIL" + "x" * 1000
    memory.write_text(json.dumps(version))
    env = {"PATH": "/usr/bin:/bin", "XDG_CACHE_HOME": str(tmp_path / "cache"), "HOME": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "console.cli", "status", str(memory.parents[1])], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    (reason,) = [line for line in proc.stdout.splitlines() if "owned" in line]
    assert "\x1b" not in proc.stdout and "\x07" not in proc.stdout and "\u202e" not in proc.stdout
    assert reason.startswith("          ␛]0;owned␇ gate \\u202eFAIL") and reason.endswith("more characters)")


def test_an_episode_without_a_version_says_unknown(idle):
    """README: the human status prints a null as ``unknown`` (the bundled example's e0002 has
    no memory version)."""
    doc = json.loads(json.dumps(idle[0]))
    doc["episodes"][-1]["version"] = None
    line = _block(render_status(doc).splitlines(), "episodes")[1]
    assert line.split()[:3] == ["e0002", "archived", "unknown"] and "v?" not in line
