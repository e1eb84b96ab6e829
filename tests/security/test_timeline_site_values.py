"""Per-site statistics come from workspace files (a receipt's ``episcope.sites``) and from
recordings (a ``timeline_sites`` event): both are checked for values no capture can have,
and a bad statement is refused with a reason naming the field, never shown."""

from __future__ import annotations

import json

import msgspec
import pytest

from console.formats.timeline import (
    NO_SITES,
    DecodedSites,
    read_timeline_receipt,
)

SITE = {"site_id": 1, "name": "load", "kind": "range", "records": 8, "ranges": 4, "total_ns": 1600,
        "median_ns": 400.0, "min_ns": 300, "max_ns": 500}
RECEIPT = {"schema": "atrex-autonomous-timeline-receipt/v1", "raw_sha256": "a" * 64}

BAD = {
    "negative records": ({"records": -1}, "records"),
    "negative total": ({"total_ns": -5}, "total_ns"),
    "negative median": ({"median_ns": -1e308}, "median_ns"),
    "infinite median": ({"median_ns": float("inf")}, "median_ns"),
    "min over 64 bits": ({"min_ns": 2**63}, "min_ns"),
    "site id over u16": ({"site_id": 70000}, "site_id"),
    "min above max": ({"min_ns": 600}, "median_ns"),
    "median above max": ({"median_ns": 501.0}, "median_ns"),
    "total below ranges x min": ({"total_ns": 1000}, "total_ns"),
    "total above ranges x max": ({"total_ns": 2001}, "total_ns"),
    "more ranges than records allow": ({"records": 7}, "records"),
    "durations without ranges": ({"ranges": 0}, "ranges is 0"),
    "ranges without durations": ({"max_ns": None}, "duration is null"),
}


def _receipt(tmp_path, name: str, extra: dict) -> object:
    path = tmp_path / name / "receipt.json"
    path.parent.mkdir()
    path.write_text(json.dumps({**RECEIPT, **extra}))
    return read_timeline_receipt(path).value


@pytest.mark.parametrize("change,field", BAD.values(), ids=BAD.keys())
def test_an_impossible_site_is_refused_naming_the_field(tmp_path, change, field):
    receipt = _receipt(tmp_path, "r", {"episcope": {"sites": [{**SITE, **change}]}})
    assert receipt.sites is None and receipt.sites_from is None
    assert receipt.sites_unknown.startswith("episcope.sites is unreadable") and field in receipt.sites_unknown
    assert "\n" not in receipt.sites_unknown
    # the same site in a recorded timeline_sites event is an unreadable event
    with pytest.raises(msgspec.ValidationError, match=field):
        msgspec.convert({"raw_sha256": None, "sites": [{**SITE, **change}]}, DecodedSites)


def test_good_sites_are_kept(tmp_path):
    closed_none = {**SITE, "site_id": 2, "name": "mark", "kind": "instant", "ranges": 0, "records": 3,
                   "total_ns": None, "median_ns": None, "min_ns": None, "max_ns": None}
    receipt = _receipt(tmp_path, "r", {"episcope": {"sites": [SITE, closed_none]}})
    assert receipt.sites_from == "receipt" and [s.site_id for s in receipt.sites] == [1, 2]


def test_a_site_id_stated_twice_is_refused(tmp_path):
    receipt = _receipt(tmp_path, "r", {"episcope": {"sites": [SITE, SITE]}})
    assert receipt.sites is None and receipt.sites_unknown == "episcope.sites is unreadable: site_id 1 stated twice"
    with pytest.raises(msgspec.ValidationError, match="site_id 1 stated twice"):
        msgspec.convert({"raw_sha256": None, "sites": [SITE, SITE]}, DecodedSites)


def test_a_non_object_episcope_key_is_not_said_to_be_akas(tmp_path):
    receipt = _receipt(tmp_path, "r", {"episcope": [1, 2]})
    assert receipt.sites is None
    assert receipt.sites_unknown == "episcope is unreadable: expected an object, got list"
    assert _receipt(tmp_path, "aka", {}).sites_unknown == NO_SITES
