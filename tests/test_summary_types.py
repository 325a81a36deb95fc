"""The typed summary (tying/cache/summary_types.py): its JSON is `summary --json`'s, read back unchanged."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from tying import registry
from tying.cache.store import open_cache
from tying.cache.summary import summarize
from tying.cache.summary_types import ALWAYS, PaperReference, Summary, paper_reference

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("name", ["demo", "paper", "sweep"])
def test_the_json_round_trips_on_the_shipped_caches(name):
    path = ROOT / "cache" / f"{name}.duckdb"
    if not path.exists():
        pytest.skip(f"the shipped cache {path.name} is absent")
    con = open_cache(path)
    try:
        s = summarize(con)
    finally:
        con.close()
    d = s.to_json()
    json.dumps(d, allow_nan=False)  # strict JSON
    assert set(ALWAYS) <= set(d)
    assert Summary.from_json(d) == s and Summary.from_json(json.loads(json.dumps(d))).to_json() == d
    for a in registry.ANALYSES:  # each analysis's fields sit at the top level of the JSON, under its name
        if s.analysis(a.name) is not None:
            assert d[a.name] == s.analysis(a.name)


def test_absent_sections_stay_out_of_the_json_and_unknown_ones_are_an_error():
    s = Summary.from_json({"kind": "pair", "lens": {"gap": None}})
    assert s.analysis("lens") == {"gap": None} and s.analysis("umap") is None
    d = s.to_json()
    assert set(d) == set(ALWAYS) | {"lens"} and "runs" not in d and "paper" not in d
    with pytest.raises(ValueError, match="no_such_section"):
        Summary.from_json({"kind": "pair", "no_such_section": 1})
    with pytest.raises(ValueError, match="table9"):
        Summary.from_json({"paper": {"preset": "olmo", "table9": {}}})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.kind = "toylab"  # type: ignore[misc]


def test_the_papers_section_says_beside_toylab_only_when_it_is():
    plain = PaperReference.from_json(paper_reference("olmo"))
    assert plain.to_json() == paper_reference("olmo") and not plain.beside_toylab
    beside = PaperReference.from_json(paper_reference("olmo") | {"beside_toylab": True})
    assert beside.to_json()["beside_toylab"] is True and beside.table1 == plain.table1
