"""What a page derives once per cache or per object instead of once per run (issue 35): the
identity memo (explorer/render/identity.py) and the per-cache results the pages now read,
each checked against the computation it replaces."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pytest

from explorer import frame
from explorer.render import (
    alignment_tables,
    dynamics_tables,
    identity,
    lens_tables,
    neighbour_tables,
    provenance,
    read,
    sweep_tables,
    tour,
)

CACHE = Path(__file__).resolve().parent.parent / "cache"


@pytest.fixture(autouse=True)
def _fresh():
    identity.clear()
    yield
    identity.clear()


def _ref(name: str) -> read.CacheRef:
    path = CACHE / f"{name}.duckdb"
    if not path.exists():
        pytest.skip(f"the shipped cache {path.name} is absent")
    return read.CacheRef.of(path)


def test_once_computes_once_per_object_and_key():
    calls = []

    def make(o):
        calls.append(o)
        return len(calls)

    a, b = [1], [1]  # equal, not the same object
    assert identity.once(a, ("k",), make) == 1
    assert identity.once(a, ("k",), make) == 1
    assert identity.once(b, ("k",), make) == 2  # another object: computed again
    assert identity.once(a, ("other",), make) == 3  # another key: computed again
    assert len(calls) == 3


def test_an_entry_holds_its_object_so_a_reused_id_never_returns_a_stale_result():
    first = identity.once(pd.DataFrame({"x": [1]}), ("sum",), lambda d: int(d["x"].sum()))
    gc.collect()
    # the first frame is still held by the memo: a new frame cannot take its id and its answer
    assert identity.once(pd.DataFrame({"x": [5]}), ("sum",), lambda d: int(d["x"].sum())) == 5 != first


def test_the_least_recently_used_entries_go_first(monkeypatch):
    monkeypatch.setattr(identity, "MAX_ENTRIES", 3)
    objs = [object() for _ in range(4)]
    counts = {}

    def make(o):
        counts[id(o)] = counts.get(id(o), 0) + 1
        return id(o)

    for o in objs[:3]:
        identity.once(o, (), make)
    identity.once(objs[0], (), make)  # used again: now the newest
    identity.once(objs[3], (), make)  # evicts objs[1], the least recently used
    identity.once(objs[0], (), make)
    identity.once(objs[1], (), make)
    assert counts[id(objs[0])] == 1 and counts[id(objs[1])] == 2


def test_per_object_keys_on_the_arguments_too():
    calls = []

    @identity.per_object
    def scaled(d: dict, f: int) -> int:
        calls.append(f)
        return d["v"] * f

    d = {"v": 3}
    assert scaled(d, 2) == 6 and scaled(d, 2) == 6 and scaled(d, 5) == 15
    assert calls == [2, 5]


def test_a_frame_is_sent_as_the_arrow_table_of_its_rows():
    df = pd.DataFrame({"token": ["a", "b", "c" * 30], "cosine": [0.1, np.nan, 0.3]})
    arrow, wide = frame._interactive(df, 1)
    assert isinstance(arrow, pa.Table)
    assert arrow.to_pandas().equals(df)
    assert wide == frozenset({"token"})  # a pinned label longer than 22 characters gets width
    mixed = pd.DataFrame({"x": [1, "a"]})  # Arrow cannot hold it: the frame goes as it is
    assert frame._interactive(mixed, 1)[0] is mixed


def test_overlap_means_equal_the_means_of_the_overlap_table():
    ref = _ref("demo")
    table = read.overlap_table(ref, 10)
    n, means = neighbour_tables.overlap_means(ref, 10)
    assert n == len(table) and set(means) == {c for c in table.columns if "~" in c}
    for pair, v in means.items():
        assert v == pytest.approx(table[pair].mean())
    ctx = read.summary(ref).overlap_context
    seen = read.tokens(ref)
    frequent = set(seen.loc[seen["freq_tied"] >= ctx["min_count"], "token"])
    sub = table[table["token"].isin(frequent)]
    n_sub, sub_means = neighbour_tables.overlap_means(ref, 10, ctx["min_count"])
    assert 0 < n_sub == len(sub) < n
    for pair, v in sub_means.items():
        assert v == pytest.approx(sub[pair].mean())


def test_provenance_tables_hold_every_meta_row_and_stage():
    ref = _ref("demo")
    meta, stages = provenance.build_tables(ref)
    assert list(meta["key"]) == sorted(read.table(ref, "meta")["key"])
    s = read.summary(ref)
    assert list(stages["stage"]) == list(s.stages)
    for row in stages.itertuples():
        assert json.loads(row.parameters) == s.stages[row.stage]["params"]


def test_sweep_baselines_are_the_mean_reference_losses_per_vocabulary():
    points = pd.DataFrame({"vocab_size": [256, 256, 512], "unigram_loss": [5.0, 6.0, 7.0],
                           "bigram_loss": [4.0, 4.5, np.nan]})
    refs = sweep_tables.sweep_baselines(points).set_index(["vocab_size", "baseline"])
    assert refs.loc[(256, "unigram_loss"), "loss"] == 5.5 and refs.loc[(256, "bigram_loss"), "loss"] == 4.25
    assert refs.loc[(256, "bigram_loss"), "label"] == "bigram 4.25"
    assert sweep_tables.sweep_baselines(points.drop(columns="bigram_loss")).empty


def test_the_claims_a_page_reads_once_are_the_claims_of_the_summary():
    from tying.cache import claims

    s = read.summary(_ref("demo"))
    once = tour.all_claims(s)
    assert once is tour.all_claims(s)
    assert {k: c.verdict for k, c in once.items()} == {k: c.verdict for k, c in claims.claims(s).items()}
    for key in claims.CLAIMS:
        assert tour.one_claim(key, s) == claims.CLAIMS[key](s)


def test_the_dynamics_choices_are_those_of_the_cache_tables():
    ref = _ref("demo")
    log, evo, runs = read.table(ref, "train_log"), read.table(ref, "evolution"), read.table(ref, "runs")
    c = dynamics_tables.run_choices(ref)
    assert c.logged == tuple(sorted(set(log["run"])))
    assert c.has_proxy == bool(log["grad_input_proxy_norm"].notna().any())
    untied = set(runs.loc[runs["variant"] == "untied", "run"])
    assert c.log_default and not set(c.log_default) & untied and all(r.startswith("tied/") for r in c.log_default)
    assert c.evolved == tuple(sorted(set(evo["run"])))
    assert all(r.endswith("seed0") for r in c.evo_default)
    assert set(c.scaling_methods) == set(read.table(ref, "scaling")["method"])


def test_not_applicable_notes_and_the_logit_lens_flag_follow_the_tables():
    ref = _ref("demo")
    summ = read.alignment_summary(ref)
    for (method, split), g in summ.groupby(["method", "split"]):
        assert alignment_tables.not_applicable(ref, method, split) == tuple(g.loc[~g["applicable"], "note"])
    assert alignment_tables.has_frequencies(ref) == bool(read.tokens(ref)["freq_tied"].notna().any())
    assert lens_tables.has_logit_lens(ref) == ("logit" in set(read.table(ref, "lens_kl")["lens"]))


def test_the_input_moved_line_names_each_width():
    points = pd.DataFrame({"d_model": [64, 128], "cos_start_input_untied": [0.981, 0.5]})
    assert sweep_tables.input_moved(points) == "d=64 0.98, d=128 0.50"
    assert sweep_tables.input_moved(points.drop(columns="cos_start_input_untied")) is None
