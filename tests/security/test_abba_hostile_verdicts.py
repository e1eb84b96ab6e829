"""Recorded or stored ABBA verdicts are workspace content: an absurd figure is shown in a
bounded width, and a verdict whose artifact names another verification than the one it is
filed under is listed (where it was filed), never dropped unsaid."""

from __future__ import annotations

import math

from console.episode.comparisons import Comparisons
from console.episode.numbers import MAX_WIDTH, bounded
from console.episode.status_text import _fmt
from console.formats.abba import AbbaVerdict
from widgets.common import fmt


def test_figures_are_shown_in_a_bounded_width():
    assert bounded(1e308, "+.2f") == "+1.00e+308"
    assert bounded(-1e308, ".2f") == "-1.00e+308"
    assert bounded(2**63) == "9.22e+18"
    assert bounded(10**400) == "1.00e+400"  # beyond a float's range
    assert bounded(12.5, "+.2f") == "+12.50" and bounded(7) == "7"
    for value in (1e308, -1e308, 2**63, 10**400, -(10**30), 1e-300, math.inf):
        assert len(bounded(value, "+.2f" if isinstance(value, float) else "")) <= MAX_WIDTH
    # the panes' and the human status' helpers both use it
    assert fmt(1e308, "+.2f", "%") == "+1.00e+308%"
    assert fmt(2**63) == "9.22e+18" and fmt(None) == "N/A" and fmt("x") == "x"
    assert _fmt(1e308, " %", 2) == "1.00e+308 %" and _fmt(2**63) == "9.22e+18" and _fmt(True) == "True"


def test_a_verdict_naming_another_verifications_artifact_is_listed_where_it_was_filed():
    own = "/ws/verify/aaaa"
    other = "/ws/verify/bbbb"
    verdicts = {
        f"{own}/result.json": AbbaVerdict(gate="FAIL", improvement_pct=-48.2, artifact=own),
        f"{other}/result.json": AbbaVerdict(gate="PASS", improvement_pct=1e308, artifact=own),
    }
    at = {f"{own}/result.json": 2.0, f"{other}/result.json": 1.0}
    shown = Comparisons().abba(verdicts, {}, at)
    assert [(c.directory, c.verdict.gate if c.verdict else None) for c in shown] == [(own, "FAIL"), (other, "PASS")]
    # Filed in neither the directory it names nor one of its own: still one entry each.
    verdicts[f"{own}/copy/result.json"] = AbbaVerdict(gate="ERROR", error="x", artifact=own)
    verdicts[f"{own}/copy/again.json"] = AbbaVerdict(gate="ERROR", error="y", artifact=own)
    listed = Comparisons().abba(verdicts, {}, at)
    assert len(listed) == 4 and len({c.directory for c in listed}) == 4
    assert {c.verdict.error for c in listed if c.verdict and c.verdict.gate == "ERROR"} == {"x", "y"}


def test_a_live_verification_and_its_archived_copy_are_still_one():
    """AKA's supervisor copies a finished verification into the episode archive: both files
    name the live directory, and they are one verification, shown once."""
    live = "/ws/verification_artifacts/.atrex_long_horizon_verify/0f0f"
    archived = "/ws/.atrex_long_horizon/episodes/e0001/verification_runtime/0f0f"
    verdicts = {f"{live}/result.json": AbbaVerdict(gate="PASS", improvement_pct=3.0, artifact=live),
                f"{archived}/result.json": AbbaVerdict(gate="PASS", improvement_pct=3.0, artifact=live)}
    shown = Comparisons().abba(verdicts, {}, {})
    assert [c.directory for c in shown] == [archived]
