"""tools/iteration_trace.py, run as the agent runs it: a separate process, without orjson."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from console.formats.telemetry import parse_telemetry_line

REPO = Path(__file__).resolve().parent.parent
TOOL = REPO / "tools" / "iteration_trace.py"
# Runs the tool as a script with orjson made unimportable (the GPU machine has none).
NO_ORJSON = "import runpy, sys; sys.modules['orjson'] = None; sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
COMMON = {
    "schema_version",
    "campaign_id",
    "iteration_id",
    "attempt_id",
    "event",
    "timestamp",
    "monotonic_seconds",
    "source",
    "measurement",
}


def trace(tmp_path: Path, *args: str, traced: bool = True, **extra_env: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATREX_TELEMETRY_") and k != "PYTHONPATH"}
    if traced:
        env["ATREX_TELEMETRY_TRACE"] = str(tmp_path / "telemetry.jsonl")
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "-c", NO_ORJSON, str(TOOL), *args], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30
    )


def lines(tmp_path: Path) -> list[dict]:
    path = tmp_path / "telemetry.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def test_phase_markers_field_for_field_with_receipt(tmp_path):
    ids = {"ATREX_TELEMETRY_CAMPAIGN_ID": "camp", "ATREX_TELEMETRY_ITERATION_ID": "episode-0003", "ATREX_TELEMETRY_ATTEMPT_ID": "invocation-2"}
    start = trace(tmp_path, "phase-start", "profile", **ids)
    end = trace(tmp_path, "phase-end", "profile", **ids)
    assert start.returncode == 0 and end.returncode == 0, start.stderr + end.stderr
    records = lines(tmp_path)
    assert [r["event"] for r in records] == ["phase_started", "phase_completed"]
    for record, action, proc in zip(records, ("start", "end"), (start, end)):
        assert set(record) == COMMON | {"phase", "action", "marker_id"}
        assert record["schema_version"] == "atrex_iteration_event_v1"
        assert (record["campaign_id"], record["iteration_id"], record["attempt_id"]) == ("camp", "episode-0003", "invocation-2")
        assert (record["source"], record["measurement"], record["phase"], record["action"]) == ("agent_marker", "explicit", "profile", action)
        assert len(record["marker_id"]) == 32 and int(record["marker_id"], 16) >= 0
        assert record["timestamp"].endswith("+00:00")
        assert isinstance(record["monotonic_seconds"], float)
        receipt = {"action": action, "kind": "phase_marker", "marker_id": record["marker_id"], "phase": "profile", "schema": "atrex.iteration_trace.v1"}
        # AKA's writer prints json.dumps(..., ensure_ascii=False, sort_keys=True): its separators too.
        expected = "ATREX_TRACE_EVENT=" + json.dumps(receipt, ensure_ascii=False, sort_keys=True)
        assert proc.stdout.splitlines() == [expected]
    assert records[0]["monotonic_seconds"] < records[1]["monotonic_seconds"]
    raw = (tmp_path / "telemetry.jsonl").read_bytes().splitlines()
    for line in raw:
        assert line == json.dumps(json.loads(line), ensure_ascii=False, sort_keys=True).encode()
        assert parse_telemetry_line(line).phase == "profile"


def test_source_read_defaults_and_url_cleaning(tmp_path):
    assert trace(tmp_path, "source-read", "workspace", "profiles/episode_1/summary.txt").returncode == 0
    web = trace(tmp_path, "source-read", "public_web", "HTTPS://docs.example.com:8443/cuda/guide.html?token=abc#sec")
    assert web.returncode == 0 and web.stdout == ""
    first, second = lines(tmp_path)
    assert set(first) == COMMON | {"source_kind", "reference"}
    assert (first["campaign_id"], first["iteration_id"], first["attempt_id"]) == ("campaign", "unknown", "attempt")
    assert (first["event"], first["source_kind"], first["reference"]) == ("source_read", "workspace", "profiles/episode_1/summary.txt")
    assert second["reference"] == "https://docs.example.com:8443/cuda/guide.html"


def test_untraced_writes_nothing(tmp_path):
    proc = trace(tmp_path, "phase-start", "research", traced=False)
    assert (proc.returncode, proc.stdout) == (0, "")
    assert proc.stderr == "iteration_trace: ATREX_TELEMETRY_TRACE is not set; nothing recorded\n"
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "args",
    [
        ("source-read", "workspace", "/etc/passwd"),
        ("source-read", "workspace", "../other/kernel.py"),
        ("source-read", "gpu_wiki", "notes/../../secret"),
        ("source-read", "public_web", "https://user:pw@example.com/page"),
        ("source-read", "public_web", "ftp://example.com/file"),
        ("source-read", "public_web", "file:///etc/passwd"),
        ("source-read", "public_web", "docs/readme.md"),
        ("source-read", "workspace", "   "),
        ("source-read", "workspace", "\\share\\kernel.py"),
        ("source-read", "workspace", "-kernel.py"),
        ("source-read", "public_web", "https://@example.com/page"),
        ("source-read", "public_web", "http://[::1/page"),
        ("source-read", "twitter", "x"),
        ("source-read", "workspace", "a", "b"),
        ("phase-start", "lunch"),
        ("phase-start",),
        (),
    ],
)
def test_unsafe_or_bad_input_is_refused(tmp_path, args):
    proc = trace(tmp_path, *args)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and proc.stderr.startswith("iteration_trace: ")
    assert proc.stdout == "" and lines(tmp_path) == []


def test_direct_script_run_from_a_workspace(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ATREX_TELEMETRY_TRACE"] = "telemetry.jsonl"
    proc = subprocess.run([sys.executable, str(TOOL), "phase-start", "planning"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=30)
    assert proc.returncode == 0 and proc.stdout.startswith("ATREX_TRACE_EVENT=")
    assert lines(tmp_path)[0]["phase"] == "planning"


WRITER = """
import sys
sys.modules["orjson"] = None
sys.path.insert(0, sys.argv[1])
import iteration_trace
for i in range(200):
    # Long references (lines of about 800 bytes) make a torn or interleaved write show.
    assert iteration_trace.main(["source-read", "workspace", f"w{sys.argv[2]}/{i:03d}/" + "x" * 480]) == 0
"""


def test_concurrent_writers_never_tear_a_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ATREX_TELEMETRY_TRACE"] = str(tmp_path / "telemetry.jsonl")
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, str(TOOL.parent), str(n)], env=env, cwd=tmp_path)
        for n in range(8)
    ]
    assert [p.wait(timeout=60) for p in procs] == [0] * 8
    data = (tmp_path / "telemetry.jsonl").read_bytes()
    assert data.endswith(b"\n")
    seen = set()
    for line in data.splitlines():
        record = parse_telemetry_line(line)
        seen.add(record.reference[:6])
    assert len(data.splitlines()) == 1600
    assert seen == {f"w{n}/{i:03d}" for n in range(8) for i in range(200)}


def _load_tool():
    spec = importlib.util.spec_from_file_location("iteration_trace_tool", TOOL)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


iteration_trace = _load_tool()


def run_in_process(tmp_path: Path, argv: list[str], env: dict[str, str]) -> tuple[int, bytes | None]:
    """The tool's main on ``argv`` (a usage error is its exit status); what it appended, if anything."""
    target = tmp_path / "telemetry.jsonl"
    try:
        code = iteration_trace.main(list(argv), {"ATREX_TELEMETRY_TRACE": str(target), **env})
    except SystemExit as exc:
        code = exc.code
    return code, (target.read_bytes() if target.exists() else None)


# What AKA's writer records for a reference (its rules, written out by hand): the value
# stripped, "\\" made "/", a URL's query and fragment dropped with its host as written, then at
# most 500 characters kept.
AKA_REFERENCES = [
    ("workspace", " kernel.py ", "kernel.py"),
    ("workspace", "profiles\\v1\\summary.txt", "profiles/v1/summary.txt"),
    ("workspace", "C:\\notes\\x.md", "C:/notes/x.md"),
    ("workspace", "~/notes.md", "~/notes.md"),
    ("workspace", "a/./b//c", "a/./b//c"),
    ("workspace", "...", "..."),
    ("workspace", "kernel.py?raw=1#L3", "kernel.py?raw=1#L3"),
    ("workspace", "a" * 501, "a" * 500),
    ("workspace", " " + "b" * 500 + " ", "b" * 500),
    ("workspace", "line\nbreak", "line\nbreak"),
    ("workspace", "esc\x1b[2J", "esc\x1b[2J"),
    ("gpu_wiki", "ünïcødé/☃.md", "ünïcødé/☃.md"),
    ("unknown", "-5", "-5"),
    ("public_web", "https://example.com/page?q=" + "a" * 520, "https://example.com/page"),
    ("public_web", "https://Example.COM/Docs", "https://Example.COM/Docs"),
    ("public_web", "HTTPS://docs.example.com:8443/cuda/guide.html?token=abc#sec", "https://docs.example.com:8443/cuda/guide.html"),
    ("public_web", "http://EXAMPLE.com:0080/A", "http://EXAMPLE.com:0080/A"),
    ("public_web", "https://example.com:/x", "https://example.com:/x"),
    ("public_web", "https://example.com:abc/x", "https://example.com:abc/x"),
    ("public_web", "https://[FE80::1]:8080/x", "https://[FE80::1]:8080/x"),
    ("public_web", " https:\\\\example.com\\a\\b ", "https://example.com/a/b"),
    ("public_web", "https://example.com", "https://example.com"),
    ("public_web", "https://example.com/" + "p" * 600, ("https://example.com/" + "p" * 600)[:500]),
]


@pytest.mark.parametrize(("kind", "given", "recorded"), AKA_REFERENCES, ids=[f"{k}-{i}" for i, (k, _, _) in enumerate(AKA_REFERENCES)])
def test_a_reference_is_recorded_as_aka_records_it(tmp_path, kind, given, recorded):
    code, written = run_in_process(tmp_path, ["source-read", kind, given], {})
    assert code == 0 and written is not None
    record = json.loads(written)
    assert (record["source_kind"], record["reference"]) == (kind, recorded)


def test_an_id_variable_set_empty_is_recorded_empty_and_an_unset_one_as_the_default(tmp_path):
    code, written = run_in_process(tmp_path, ["phase-start", "profile"],
                                   {"ATREX_TELEMETRY_CAMPAIGN_ID": "", "ATREX_TELEMETRY_ITERATION_ID": ""})
    record = json.loads(written)
    assert code == 0 and (record["campaign_id"], record["iteration_id"], record["attempt_id"]) == ("", "", "attempt")


AKA_WRITTEN = REPO / "tests" / "fixtures" / "aka" / "iteration_trace" / "aka_records.jsonl"
AKA_CASES = [json.loads(line) for line in AKA_WRITTEN.read_text(encoding="utf-8").splitlines()]


def _as_ours(aka_text: str, ours: bytes) -> bytes:
    """AKA's line or receipt with its clock readings and marker id replaced by ours, the only
    values two runs cannot share."""
    aka, mine = json.loads(aka_text.split("=", 1)[1] if aka_text.startswith("ATREX_") else aka_text), json.loads(
        ours.split(b"=", 1)[1] if ours.startswith(b"ATREX_") else ours)
    for key in ("timestamp", "monotonic_seconds", "marker_id"):
        if key in aka:
            aka_text = aka_text.replace(json.dumps(aka[key]), json.dumps(mine[key]))
    return aka_text.encode("utf-8")


@pytest.mark.parametrize("case", AKA_CASES, ids=[f"{i}-{c['argv'][0]}" for i, c in enumerate(AKA_CASES)])
def test_records_match_those_aka_wrote_byte_for_byte(tmp_path, capsys, case):
    code, written = run_in_process(tmp_path, case["argv"], case["env"])
    stdout = capsys.readouterr().out.encode("utf-8")
    if not case["recorded"]:
        assert code != 0 and written is None and stdout == b""
        return
    assert code == 0 and written is not None
    assert written == _as_ours(case["trace"], written)
    assert stdout == (_as_ours(case["stdout"], stdout) if case["stdout"] else b"")


def test_a_trace_that_is_not_a_regular_file_is_one_line_and_never_blocks(tmp_path):
    fifo = tmp_path / "trace.fifo"
    os.mkfifo(fifo)
    for target in (fifo, tmp_path):
        proc = trace(tmp_path, "phase-start", "profile", ATREX_TELEMETRY_TRACE=str(target))
        assert proc.returncode == 1 and proc.stdout == "", proc
        assert len(proc.stderr.splitlines()) == 1 and proc.stderr.startswith("iteration_trace: cannot append to ")
    assert "not a regular file" in proc.stderr or "Is a directory" in proc.stderr
    # With a reader on the FIFO the open succeeds, and the line is still not written into it.
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)
    try:
        proc = trace(tmp_path, "source-read", "workspace", "kernel.py", ATREX_TELEMETRY_TRACE=str(fifo))
        assert proc.returncode == 1 and "not a regular file" in proc.stderr
        try:
            data = os.read(reader, 4096)
        except BlockingIOError:  # the writer is still open: nothing to read either
            data = b""
        assert data == b""
    finally:
        os.close(reader)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.fifo"]


def test_an_argument_that_is_not_utf8_is_refused_in_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["ATREX_TELEMETRY_TRACE"] = str(tmp_path / "telemetry.jsonl")
    proc = subprocess.run([sys.executable, str(TOOL), "source-read", "workspace", b"kernel\xff.py"], env=env,
                          capture_output=True, timeout=30, cwd=tmp_path)
    assert proc.returncode == 2 and proc.stdout == b"" and len(proc.stderr.splitlines()) == 1
    assert lines(tmp_path) == []
