"""Two captures AKA's timeline decoder refuses, which episcope's must refuse too."""

from __future__ import annotations

import pytest

from console.timeline import abi
from console.timeline.decode import CaptureRejected, decode
from console.timeline.manifest import SpecError, parse_manifest
from timeline_support import load, parsed, records


def test_an_uncommitted_slot_with_data_is_refused():
    """AKA: "slot N is nonzero without the committed flag". Here the data sits past the
    owner's last record, so no other check (a hole) catches it."""
    buf, man, dic = parsed("capture_ok")
    h = abi.Header.unpack(bytes(buf[:64]))
    rows = records(buf, h)
    last = h.records_per_owner - 1
    rows[last, 3] &= 0x7FFFFFFF  # owner 0's last record: no longer committed ...
    rows[last, 0:3] = 0
    rows[last, 2] = 7  # ... yet not empty: a stray payload word
    with pytest.raises(CaptureRejected) as err:
        decode(bytes(buf), man, dic)
    (problem,) = [p for p in err.value.problems if p.code == "uncommitted_nonzero"]
    assert problem.offsets == (64 + 16 * last,)
    assert "hole" not in err.value.codes


@pytest.mark.parametrize("backend", ["iket", "hip", None])
def test_an_atrexlt1_manifest_names_the_cuda_backend(backend):
    _, man, _ = load("capture_ok")
    with pytest.raises(SpecError, match="manifest backend must be cuda"):
        parse_manifest(dict(man, backend=backend))
