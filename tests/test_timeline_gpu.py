"""The CUDA probe on a real GPU: captures decode, status bits fire, a disabled build is silent.

Run on the GPU machine: PYTHONPATH=. python3 -m pytest -m gpu tests/test_timeline_gpu.py
With ATREX_TIMELINE_FIXTURE_DIR set, the raw captures are also written there (they become
the CPU tests' fixtures).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "skills" / "autonomous-gpu-kernel-timeline" / "backends"))

from console.timeline import abi  # noqa: E402
from console.timeline.decode import CaptureRejected, decode  # noqa: E402
from console.timeline.manifest import EVENTS_SCHEMA, MANIFEST_SCHEMA, parse_dictionary, parse_manifest  # noqa: E402

pytestmark = pytest.mark.gpu

KERNEL = r"""
extern "C" __global__ void fixture_kernel(float* out, int iters, void* timeline) {
  const unsigned int warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
  // writers: ordinal 0 = warp 0 lane 0, 1 = warp 1 lane 5, 2 = warp 3 lane 0 (warp 2 silent)
  const bool writer = (warp == 0u && lane == 0u) || (warp == 1u && lane == 5u) || (warp == 3u && lane == 0u);
  const unsigned int ordinal = warp == 0u ? 0u : (warp == 1u ? 1u : 2u);
  atrex::timeline::Recorder rec(timeline, ordinal, writer);
  float acc = static_cast<float>(threadIdx.x);
  rec.instant(atrex_sites::start, blockIdx.x + 10u * blockIdx.y);
  for (int it = 0; it < iters; ++it) {
    rec.begin(atrex_sites::mainloop, it);
    rec.begin(atrex_sites::compute, it);
    for (int k = 0; k < 200 * (1 + (int)warp); ++k) acc = fmaf(acc, 0.999f, 0.5f);
    if (it > 0) rec.end(atrex_sites::carry, it - 1);
    rec.end(atrex_sites::compute, it);
    rec.begin(atrex_sites::carry, it);
    rec.counter(atrex_sites::progress, static_cast<unsigned int>(acc));
    rec.end(atrex_sites::mainloop, it);
  }
  rec.end(atrex_sites::carry, iters - 1);
  out[(blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x + threadIdx.x] = acc;
}
"""
DICTIONARY = {
    "schema": EVENTS_SCHEMA,
    "sites": [
        {"site_id": 1, "name": "mainloop", "kind": "range", "boundary_semantics": "issue order"},
        {"site_id": 2, "name": "compute", "kind": "range"},
        {"site_id": 3, "name": "carry", "kind": "range", "async_domain": "crosses iterations"},
        {"site_id": 7, "name": "start", "kind": "instant"},
        {"site_id": 9, "name": "progress", "kind": "counter"},
    ],
}
GRID, BLOCK, ITERS = (3, 2, 1), (128, 1, 1), 6
EVENTS_PER_WRITER = 7 * ITERS + 1


def manifest(launch_id: int, rpo: int, grid=GRID) -> dict:
    return {
        "schema": MANIFEST_SCHEMA, "backend": "cuda", "grid": list(grid), "block": list(BLOCK),
        "launch_id": launch_id, "records_per_owner": rpo,
        "owner_layout": {"kind": "cta_writers", "writers": [
            {"ordinal": 0, "label": "warp0", "warp": 0, "lane": 0, "group": "producer"},
            {"ordinal": 1, "label": "warp1.lane5", "warp": 1, "lane": 5, "thread": 37},
            {"ordinal": 2, "label": "warp3", "thread": 96},
        ]},
    }


@pytest.fixture(scope="module")
def cuda():
    cupy = pytest.importorskip("cupy")
    from cuda_backend import cupy_adapter

    return cupy, cupy_adapter


def _launch(cuda, man: dict, enabled: bool = True, buf=None, launch_grid=GRID):
    cupy, adapter = cuda
    mod = adapter.compile_module(KERNEL, DICTIONARY, enabled=enabled, source_name="fixture_kernel.cu",
                                 options=("-std=c++17",))
    buf = buf or adapter.TimelineBuffer(man)
    out = cupy.zeros(GRID[0] * GRID[1] * BLOCK[0], dtype=cupy.float32)
    mod.get_function("fixture_kernel")(launch_grid, BLOCK, (out, np.int32(ITERS), np.uint64(buf.ptr)))
    cupy.cuda.runtime.deviceSynchronize()
    return buf


def _keep(name: str, raw: bytes, man: dict, cuda) -> None:
    where = os.environ.get("ATREX_TIMELINE_FIXTURE_DIR")
    if not where:
        return
    _, adapter = cuda
    out = Path(where)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.bin").write_bytes(raw)
    (out / f"{name}.manifest.json").write_text(json.dumps(man, indent=2, sort_keys=True) + "\n")
    (out / "fixture.events.json").write_text(json.dumps(DICTIONARY, indent=2, sort_keys=True) + "\n")
    (out / "fixture_kernel.cu").write_text(KERNEL)
    (out / "fixture_kernel.instrumented.cu").write_text(
        adapter.instrument_source(KERNEL, DICTIONARY, source_name="fixture_kernel.cu"))


def test_capture_decodes_with_every_kind_and_writer_layout(cuda):
    man = manifest(41, 48)
    raw = _launch(cuda, man).raw()
    _keep("capture_ok", raw, man, cuda)
    cap = decode(raw, parse_manifest(man), parse_dictionary(DICTIONARY))
    owners = GRID[0] * GRID[1] * 3
    assert cap.committed_records == owners * EVENTS_PER_WRITER
    assert len(cap.ranges["owner"]) == owners * 3 * ITERS
    claims = np.frombuffer(raw, "<u8", owners, abi.HEADER_BYTES + owners * 48 * 16)
    assert int(claims[1 * 3 + 1]) == abi.claim_word(1, 37)  # cta 1, writer warp1.lane5
    assert all(e >= b for b, e in zip(cap.ranges["begin_ns"], cap.ranges["end_ns"]))
    assert 1 <= len(set(cap.events["sm"])) <= 132


def test_overflow_duplicate_and_bad_header_set_status_bits(cuda):
    man = manifest(42, 16)
    raw = _launch(cuda, man).raw()
    _keep("capture_overflow", raw, man, cuda)
    with pytest.raises(CaptureRejected) as err:
        decode(raw, parse_manifest(man), parse_dictionary(DICTIONARY))
    assert "status_overflow" in err.value.codes
    assert abi.Header.unpack(raw).status == abi.STATUS_OVERFLOW
    # a second launch on the same buffer finds every claim taken
    man = manifest(43, 48)
    buf = _launch(cuda, man)
    raw = _launch(cuda, man, buf=buf).raw()
    _keep("capture_duplicate", raw, man, cuda)
    assert abi.Header.unpack(raw).status == abi.STATUS_DUPLICATE_OWNER
    # a header written for another grid
    man = manifest(44, 48, grid=(3, 1, 1))
    raw = _launch(cuda, man).raw()
    assert abi.Header.unpack(raw).status == abi.STATUS_BAD_HEADER
    assert not any(raw[abi.HEADER_BYTES:])


def test_disabled_build_writes_nothing(cuda):
    man = manifest(45, 48)
    raw = _launch(cuda, man, enabled=False).raw()
    assert raw[: abi.HEADER_BYTES] == abi.new_header(GRID, BLOCK, 18, 48, 45).pack()
    assert not any(raw[abi.HEADER_BYTES:])


# Each field the probe checks in its single-round-trip header read, set wrong one at a time.
BAD_HEADER_FIELDS = {
    "magic": {"magic": abi.MAGIC ^ 1},
    "abi_major": {"abi_major": 2},
    "header_bytes": {"header_bytes": 32},
    "record_bytes": {"record_bytes": 32},
    "capacity": {"capacity": 18 * 48 - 1},
    "grid_z": {"grid": (3, 2, 2)},
    "block_z": {"block": (128, 1, 2)},
}


@pytest.mark.parametrize("field", sorted(BAD_HEADER_FIELDS))
def test_each_checked_header_field_rejects_the_launch(cuda, field):
    man = manifest(46, 48)
    _, adapter = cuda
    buf = adapter.TimelineBuffer(man)
    buf.header = buf.header._replace(**BAD_HEADER_FIELDS[field])
    buf.reset()
    raw = _launch(cuda, man, buf=buf).raw()
    assert abi.Header.unpack(raw).status == abi.STATUS_BAD_HEADER
    assert not any(raw[abi.HEADER_BYTES:])


def test_owner_count_that_is_not_a_multiple_of_the_grid_sets_bad_owner(cuda):
    man = manifest(47, 48)
    _, adapter = cuda
    buf = adapter.TimelineBuffer(man)
    buf.header = buf.header._replace(owner_count=17, capacity=17 * 48)
    buf.reset()
    raw = _launch(cuda, man, buf=buf).raw()
    assert abi.Header.unpack(raw).status == abi.STATUS_BAD_OWNER
    assert not any(raw[abi.HEADER_BYTES:])


EARLY_RETURN_KERNEL = r"""
extern "C" __global__ void early_return(int events, void* timeline) {
  atrex::timeline::Recorder rec(timeline, 0u, threadIdx.x == 0u);
  for (int e = 0; e < events; ++e) {
    rec.instant(atrex_sites::start, e);
    if (e == events - 1) return;  // the destructor still publishes a dropped event
  }
}
"""


@pytest.mark.parametrize("events,status", [(8, 0), (9, abi.STATUS_OVERFLOW)])
def test_full_range_stops_and_overflow_is_published_on_return(cuda, events, status):
    cupy, adapter = cuda
    man = {"schema": MANIFEST_SCHEMA, "backend": "cuda", "grid": [2, 1, 1], "block": [32, 1, 1],
           "launch_id": 48, "records_per_owner": 8,
           "owner_layout": {"kind": "cta_writers", "writers": [{"ordinal": 0, "label": "lane0", "warp": 0}]}}
    buf = adapter.TimelineBuffer(man)
    mod = adapter.compile_module(EARLY_RETURN_KERNEL, DICTIONARY, source_name="early_return.cu")
    mod.get_function("early_return")((2,), (32,), (np.int32(events), np.uint64(buf.ptr)))
    cupy.cuda.runtime.deviceSynchronize()
    raw = buf.raw()
    assert abi.Header.unpack(raw).status == status
    record = np.dtype([("timestamp_ns", "<u8"), ("payload", "<u4"), ("tag", "<u4")])  # abi.RECORD_STRUCT
    records = np.frombuffer(raw, record, 16, abi.HEADER_BYTES)
    assert (records["tag"] >> 31 == 1).all()  # both owners' ranges full, nothing past them
    assert records["payload"].tolist() == list(range(8)) * 2
    if status == 0:
        assert decode(raw, parse_manifest(man), parse_dictionary(DICTIONARY)).committed_records == 16


def test_the_timeline_command_writes_and_validates_a_live_capture_with_its_site_statistics(cuda, tmp_path):
    """The whole command on a capture taken now: its receipt states every site's statistics
    (``episcope.sites``), equal to those of the decoded buffer, and ``validate`` accepts it."""
    import subprocess

    from console.timeline.summary import site_statistics

    _, adapter = cuda
    man = manifest(45, 48)
    raw = _launch(cuda, man).raw()
    (tmp_path / "live.bin").write_bytes(raw)
    (tmp_path / "live.manifest.json").write_text(json.dumps(man))
    (tmp_path / "fixture.events.json").write_text(json.dumps(DICTIONARY))
    (tmp_path / "fixture_kernel.cu").write_text(KERNEL)
    (tmp_path / "fixture_kernel.instrumented.cu").write_text(
        adapter.instrument_source(KERNEL, DICTIONARY, source_name="fixture_kernel.cu"))
    script = ROOT / "skills" / "autonomous-gpu-kernel-timeline" / "scripts" / "timeline.py"
    decoded = subprocess.run(
        [sys.executable, str(script), "decode", "--raw", str(tmp_path / "live.bin"),
         "--manifest", str(tmp_path / "live.manifest.json"), "--dictionary", str(tmp_path / "fixture.events.json"),
         "--clean-source", str(tmp_path / "fixture_kernel.cu"),
         "--instrumented-source", str(tmp_path / "fixture_kernel.instrumented.cu"),
         "--workload-identity", "gpu-live", "--output-dir", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120)
    assert decoded.returncode == 0, decoded.stderr
    receipt = json.loads((tmp_path / "out" / "receipt.json").read_text())
    capture = decode(raw, parse_manifest(man), parse_dictionary(DICTIONARY))
    assert receipt["episcope"]["sites"] == json.loads(json.dumps(site_statistics(capture)))
    assert {site["name"] for site in receipt["episcope"]["sites"]} == {s["name"] for s in DICTIONARY["sites"]}
    checked = subprocess.run([sys.executable, str(script), "validate", str(tmp_path / "out" / "receipt.json")],
                             capture_output=True, text=True, timeout=120)
    assert checked.returncode == 0 and json.loads(checked.stdout)["valid"] is True, checked.stdout + checked.stderr
