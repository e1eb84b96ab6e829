"""``timeline.py decode``, ``export`` and ``validate`` (of a CUDA capture) on the standard library alone.

numpy's import costs about as long as AKA's whole stdlib ``decode``, so the command path must
not import it. The command runs in a fresh interpreter in which importing numpy fails; it must
still write the same artifacts as an ordinary run, and ``validate`` must accept them, numpy refused too.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from timeline_support import FIXTURES

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "skills" / "autonomous-gpu-kernel-timeline" / "scripts" / "timeline.py"
# runs the script as __main__ with every numpy import refused
WITHOUT_NUMPY = """
import runpy, sys

class RefuseNumpy:
    def find_spec(self, name, path=None, target=None):
        if name == "numpy" or name.startswith("numpy."):
            raise ImportError("numpy is not importable in this test")

sys.meta_path.insert(0, RefuseNumpy())
script = sys.argv[1]
sys.argv = sys.argv[1:]
runpy.run_path(script, run_name="__main__")
"""


def _decode_args(out: Path) -> list[str]:
    return ["decode", "--raw", str(FIXTURES / "capture_ok.bin"), "--manifest", str(FIXTURES / "capture_ok.manifest.json"),
            "--dictionary", str(FIXTURES / "fixture.events.json"), "--clean-source", str(FIXTURES / "fixture_kernel.cu"),
            "--instrumented-source", str(FIXTURES / "fixture_kernel.instrumented.cu"), "--workload-identity", "w",
            "--interval", "mainloop -> compute", "--output-dir", str(out)]


def _run(args: list[str], *, numpy: bool) -> subprocess.CompletedProcess[str]:
    prefix = [sys.executable, str(SCRIPT)] if numpy else [sys.executable, "-c", WITHOUT_NUMPY, str(SCRIPT)]
    return subprocess.run(prefix + args, capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_the_blocker_really_refuses_numpy():
    blocker = WITHOUT_NUMPY.split("script =")[0]
    check = subprocess.run([sys.executable, "-c", blocker + "import numpy"], capture_output=True, text=True)
    assert check.returncode != 0 and "numpy is not importable" in check.stderr


def test_decode_and_export_run_without_numpy_and_write_what_an_ordinary_run_writes(tmp_path):
    plain, blocked = tmp_path / "plain", tmp_path / "blocked"
    ordinary = _run(_decode_args(plain), numpy=True)
    assert ordinary.returncode == 0, ordinary.stderr
    done = _run(_decode_args(blocked), numpy=False)
    assert done.returncode == 0, done.stderr
    for name in ("trace.perfetto.json.gz", "trace.summary.json"):
        assert (blocked / name).read_bytes() == (plain / name).read_bytes(), name
    # a receipt names its files relative to itself, and both output directories are siblings
    assert (blocked / "receipt.json").read_bytes() == (plain / "receipt.json").read_bytes()
    exported = _run(["export", "--receipt", str(blocked / "receipt.json"), "--output-dir", str(blocked)], numpy=False)
    assert exported.returncode == 0, exported.stderr
    assert (blocked / "trace.perfetto.pb").stat().st_size > 0
    valid = _run(["validate", str(blocked / "receipt.json")], numpy=False)
    assert valid.returncode == 0, valid.stderr


def test_a_rejected_capture_is_reported_without_numpy(tmp_path):
    args = _decode_args(tmp_path / "out")
    args[args.index("--raw") + 1] = str(FIXTURES / "capture_overflow.bin")
    args[args.index("--manifest") + 1] = str(FIXTURES / "capture_overflow.manifest.json")
    done = _run(args, numpy=False)
    assert done.returncode == 2
    assert done.stderr.startswith("timeline: status_overflow: status bit overflow is set")
    assert not (tmp_path / "out" / "receipt.json").exists()


def test_every_verb_of_the_command_line_has_a_handler_and_every_handler_a_verb():
    import argparse

    from console.timeline.tool import HANDLERS, build_parser

    subparsers = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    assert set(subparsers.choices) == set(HANDLERS)
    for verb in HANDLERS:  # the one-verb parser a run builds knows that verb alone
        only = next(a for a in build_parser(verb)._actions if isinstance(a, argparse._SubParsersAction))
        assert set(only.choices) == {verb}
