"""The cache records the parameters each pair stage actually ran with, not the ones requested.

The lens stage caps the sequence length at each model's context, so its micro-batches and
sequence length differ from the request's; the spectral distance caps its components at
2 n - 1 for n tokens. What the stages table holds must be what ran, and a rerun with the
same request must still skip the stage.
"""

from __future__ import annotations

import json

import pytest
import torch

from precompute.cli import main
from tests.stage_lists import MATRICES_ONLY
from tests.tiny_models import make_tiny_model, tiny_config
from tying.cache.store import finished_stages, open_cache, query_df

CONTEXT = 16
"""The tiny models' context (GPT-2's n_positions, its max_position_embeddings): below --lens-seq-len."""


def _short_context_model(out, tokenizer_dir, *, tied: bool, seed: int):
    """A tiny GPT-2 whose position table has CONTEXT rows: a longer sequence cannot even run."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    config = tiny_config("gpt2", vocab_size=len(tok), d=32, n_layers=2, tied=tied)
    config.n_positions = CONTEXT
    assert config.max_position_embeddings == CONTEXT
    torch.manual_seed(seed)
    AutoModelForCausalLM.from_config(config).save_pretrained(out)
    tok.save_pretrained(out)
    return out


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def _stages(path):
    con = open_cache(path)
    try:
        return finished_stages(con), query_df(con, "SELECT * FROM spectral")
    finally:
        con.close()


@pytest.mark.slow  # trains two lenses: about 15 s on 2 cores
def test_the_recorded_lens_budget_is_the_one_that_trained(tmp_path, tokenizer_dir, capsys, monkeypatch):
    import tying.lens.train

    tied = _short_context_model(tmp_path / "tied", tokenizer_dir, tied=True, seed=1)
    untied = _short_context_model(tmp_path / "untied", tokenizer_dir, tied=False, seed=2)
    trained = []
    real = tying.lens.train.train_tuned_lens

    def spy(model, batches, **kwargs):
        trained.append({"steps": kwargs["steps"], "accumulate": kwargs["accumulate"],
                        "shapes": [tuple(b.shape) for b in batches]})
        return real(model, batches, **kwargs)

    monkeypatch.setattr(tying.lens.train, "train_tuned_lens", spy)
    # the time estimate's probe steps (tying.lens.estimate) are not the training: they keep the
    # real function, however the test run imported that module (before this patch or after it)
    import tying.lens.estimate

    monkeypatch.setattr(tying.lens.estimate, "train_tuned_lens", real)
    # micro-batches of 2 x 32 requested; the context allows 2 x 16, so 100 tokens per step
    # take ceil(100 / 32) = 4 of them (the request alone would say 2 of 2 x 32)
    argv = ["lens", "--tied", tied, "--untied", untied, "--cache-dir", tmp_path / "cache", "--name", "short",
            "--lens-steps", "3", "--lens-seq-len", "32", "--lens-batch-size", "2", "--lens-tokens-per-step", "100",
            "--lens-train-tokens", "1024", "--lens-eval-tokens", "256", "--device", "cpu"]
    code, _, err = _run(capsys, *argv)
    assert code == 0, err
    assert len(trained) == 2  # one lens per model
    stages, _ = _stages(tmp_path / "cache" / "short.duckdb")
    lens = stages["lens"]["params"]
    assert lens["seq_len"] == 32 and lens["tokens_per_step"] == 100  # the request, as given
    for role, run in zip(("tied", "untied"), trained):
        budget = lens["budget"][role]
        batch_size, seq_len = run["shapes"][0]
        assert all(shape[1] <= seq_len for shape in run["shapes"])
        assert (budget["batch_size"], budget["seq_len"]) == (batch_size, seq_len) == (2, CONTEXT)
        assert budget["accumulate"] == run["accumulate"] == 4
        assert budget["tokens_per_step"] == run["accumulate"] * batch_size * seq_len == 128
        assert budget["steps"] == run["steps"] == 3 and budget["device"] == "cpu"
        assert budget["text_tokens"] == sum(s[0] * s[1] for s in run["shapes"])
        # the translator's sidecar holds the same budget, so the trajectory command finds it first
        from tying.layout import lens_files
        from tying.lens import LensBudget

        first = lens_files(tmp_path / "cache" / "short.duckdb", role, LensBudget.from_dict(budget))[0]
        saved = json.loads(first.with_suffix(".json").read_text())["meta"]["budget"]
        assert saved == {k: v for k, v in budget.items() if k != "device"}

    # the same request again: the stage is skipped (its hash is the request's), nothing retrains
    code, _, err = _run(capsys, *argv)
    assert code == 0, err
    assert len(trained) == 2
    again, _ = _stages(tmp_path / "cache" / "short.duckdb")
    assert again["lens"]["finished_at"] == stages["lens"]["finished_at"]
    assert again["lens"]["params"] == lens


@pytest.fixture(scope="module")
def llama_pair(tmp_path_factory, tokenizer_dir):
    root = tmp_path_factory.mktemp("recorded-pair")
    return {role: make_tiny_model("llama", root / role, tied=role == "tied", tokenizer_dir=tokenizer_dir, seed=i)
            for i, role in enumerate(("tied", "untied"), start=1)}


@pytest.mark.slow
def test_the_recorded_spectral_components_are_the_ones_used(llama_pair, tmp_path, capsys, monkeypatch):
    import tying.analysis.spectral as spectral

    widths = []
    real = spectral.adjacency_spectral_embedding

    def spy(M, n_components, **kwargs):
        Z = real(M, n_components, **kwargs)
        widths.append(Z.shape[1])
        return Z

    monkeypatch.setattr(spectral, "adjacency_spectral_embedding", spy)
    # 40 sampled tokens: the omnibus matrix has 80 nodes, so at most 79 components of the 500 asked
    argv = ["pair", "--tied", llama_pair["tied"], "--untied", llama_pair["untied"], "--cache-dir", tmp_path,
            "--name", "clamped", "--skip", f"alignment,{MATRICES_ONLY}", "--neighbours-k", "10",
            "--spectral-tokens", "40", "--spectral-k", "60", "--spectral-components", "500"]
    code, _, err = _run(capsys, *argv)
    assert code == 0, err
    assert widths == [79, 79, 79]  # three matrix pairs
    stages, table = _stages(tmp_path / "clamped.duckdb")
    params = stages["spectral"]["params"]
    assert (params["components"], params["k"], params["tokens"]) == (500, 60, 40)  # the request, as given
    assert params["ran"] == {"components": 79, "k": 39, "tokens": 40, "sampled": True}
    assert (table["n_components"] == 79).all() and (table["graph_k"] == 39).all() and (table["n_tokens"] == 40).all()
    assert stages["neighbours"]["params"]["ran"] == {"k": 10}
    # a rerun of the same request skips the stage
    code, _, err = _run(capsys, *argv)
    assert code == 0, err
    assert widths == [79, 79, 79]
    assert _stages(tmp_path / "clamped.duckdb")[0]["spectral"]["finished_at"] == stages["spectral"]["finished_at"]


def test_the_lens_page_states_each_models_own_budget():
    import numpy as np
    import pandas as pd

    from explorer.render.convergence import lens_convergence

    steps = np.arange(20)
    curve = pd.concat([pd.DataFrame({"model": m, "step": steps, "layer": layer, "kl_bits": 1.0})
                       for m in ("tied", "untied") for layer in (0, 1)], ignore_index=True)
    one = {"steps": 20, "tokens_per_step": 128, "accumulate": 4, "batch_size": 2, "seq_len": 16, "device": "cpu"}
    per_model = {"tied": one, "untied": dict(one, accumulate=2, seq_len=32)}
    lines = dict(zip(["tied", "untied"], lens_convergence(curve, per_model)))
    assert "(4 micro-batches of 2 × 16)" in lines["tied"] and "(2 micro-batches of 2 × 32)" in lines["untied"]
    old = lens_convergence(curve, one)  # a cache from before: one budget for both models
    assert all("(4 micro-batches of 2 × 16)" in line for line in old)
    assert all("Budget" not in line for line in lens_convergence(curve, None))
