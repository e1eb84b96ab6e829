"""The artifact registry: one table that ingest, replay and the README all follow."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.episode.registry import ARTIFACTS, BY_KIND, artifact_at, markdown_table

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_lists_every_artifact_as_the_registry_prints_it():
    readme = (ROOT / "README.md").read_text()
    assert markdown_table() in readme, "README's artifact table is stale: paste `python -m console.episode.registry`"
    for row in ARTIFACTS:
        assert f"`{row.kind}`" in readme


def test_every_row_is_complete_and_every_kind_has_one_row():
    assert len(BY_KIND) == len(ARTIFACTS)
    for row in ARTIFACTS:
        if row.layout == "derived":
            assert row.patterns == () and row.read is None, row.kind
        else:
            assert row.patterns and callable(row.read), row.kind


@pytest.mark.parametrize(
    "rel, kind",
    [
        ("memory/v7.json", "memory_version"),
        ("memory/vx.json", None),  # <N> is a number
        ("profiles/summary.txt", "profile"),  # **/ may stand for no directory at all
        ("profiles/episode_1/shape-0/gateway_profile.json", "profile"),
        ("a/b/.atrex_long_horizon_verify/0f0f/result.json", "abba"),
        (".atrex_long_horizon_verify/0f0f/result.json", "abba"),
        ("a/.atrex_long_horizon_verify/result.json", None),
        (".atrex_long_horizon/episodes/e1/sub/attempt.json", None),  # * is one name, not a path
        ("timeline/overhead_measurement.json", "timeline_measurement"),
        ("runs.jsonl", None),
    ],
)
def test_patterns(rel, kind):
    row = artifact_at(rel)
    assert (row.kind if row is not None else None) == kind
