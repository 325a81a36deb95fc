"""Self-prediction (tying/lens/self_prediction.py), an analysis added through the registry: known
answers on built models, a brute-force check, and the stage end to end into a pair cache."""

import json

import numpy as np
import pytest
import torch

from tying.lens.self_prediction import self_prediction

V, D = 32, 64


def _llama(tied: bool, seed: int = 0):
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=V, hidden_size=D, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=4, max_position_embeddings=64, tie_word_embeddings=tied)
    return LlamaForCausalLM(cfg).eval()


def _blocks_zeroed(model):
    """Every block adds nothing to the residual stream: each hidden state is the input's embedding."""
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
    return model


def _orthonormal_rows(seed: int = 1) -> torch.Tensor:
    q, _ = torch.linalg.qr(torch.randn(D, D, generator=torch.Generator().manual_seed(seed)))
    return q[:V].contiguous()  # V orthonormal rows of width D (V <= D)


def _batches(seed: int = 2, n: int = 3):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, V, (2, 16), generator=g) for _ in range(n)]


def _shares(df, lens="logit", matrix=None):
    rows = df[(df["lens"] == lens) & ((df["matrix"] == matrix) if matrix else True)]
    return rows.sort_values("layer")["share"].to_numpy()


def test_a_tied_model_with_empty_blocks_and_orthonormal_rows_reads_back_every_input_token():
    model = _blocks_zeroed(_llama(tied=True))
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(_orthonormal_rows())
    df = self_prediction(model, _batches(), tied=True)
    assert set(df["matrix"]) == {"T"} and set(df["lens"]) == {"logit"}
    np.testing.assert_allclose(_shares(df), 1.0)  # every hidden state, every position
    assert (df["n_positions"] == 3 * 2 * 16).all()


def test_an_untied_model_whose_output_is_its_input_reads_back_alike_and_a_random_output_near_chance():
    model = _blocks_zeroed(_llama(tied=False))
    rows = _orthonormal_rows()
    with torch.no_grad():
        model.get_input_embeddings().weight.copy_(rows)
        model.lm_head.weight.copy_(rows)  # O = I
    df = self_prediction(model, _batches(), tied=False)
    assert set(df["matrix"]) == {"O", "I"}  # a lens through each matrix
    np.testing.assert_allclose(_shares(df, matrix="O"), 1.0)
    np.testing.assert_allclose(_shares(df, matrix="I"), 1.0)
    with torch.no_grad():
        model.lm_head.weight.copy_(torch.randn(V, D, generator=torch.Generator().manual_seed(5)))
    df = self_prediction(model, _batches(n=20), tied=False)  # 640 positions
    assert (_shares(df, matrix="O") < 3 / V).all()  # chance is 1/V
    np.testing.assert_allclose(_shares(df, matrix="I"), 1.0)  # I still reads back what it embedded


def test_the_shares_agree_with_a_brute_force_reading_of_the_hidden_states():
    """A random untied model: the logit lens by hand (final norm, then each matrix) at every state."""
    model = _llama(tied=False, seed=3)
    batches = _batches(n=2)
    df = self_prediction(model, batches, tied=False)
    with torch.no_grad():
        for matrix, weight in (("O", model.lm_head.weight), ("I", model.get_input_embeddings().weight)):
            hits, n = np.zeros(3), 0
            for ids in batches:
                out = model.model(input_ids=ids, output_hidden_states=True)
                states = list(out.hidden_states)
                # transformers' last hidden state has the final norm applied already: the lens reads its input
                states[-1] = _pre_norm_last(model, ids)
                for layer, h in enumerate(states):
                    top = (model.model.norm(h) @ weight.T).argmax(-1)
                    hits[layer] += (top == ids).sum().item()
                n += ids.numel()
            np.testing.assert_allclose(_shares(df, matrix=matrix), hits / n)


def _pre_norm_last(model, ids):
    seen = {}
    hook = model.model.norm.register_forward_pre_hook(lambda m, args: seen.setdefault("h", args[0]))
    try:
        model.model(input_ids=ids)
    finally:
        hook.remove()
    return seen["h"]


@pytest.mark.slow
def test_the_pair_stage_writes_the_table_and_the_lens_page_draws_it(tiny_model, tmp_path, capsys):
    """Through the registry: `precompute pair` runs the stage (after the lens stage, whose tuned lenses
    it reads through), the summary lists it, the figure registry has its figure for this cache."""
    from explorer.render import figures, pages, read
    from precompute.cli import main

    tied, untied = tiny_model("llama", True, seed=1), tiny_model("llama", False, seed=2)
    argv = ["pair", "--tied", tied, "--untied", untied, "--cache-dir", tmp_path, "--name", "p", "--skip",
            "umap,spectral", "--lens-steps", "3", "--lens-eval-tokens", "512", "--lens-train-tokens", "2048",
            "--neighbours-k", "10"]
    assert main([str(a) for a in argv]) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "p.duckdb"), "--json"]) == 0
    assert "self_prediction" in json.loads(capsys.readouterr().out)["stages"]
    ref = read.CacheRef.of(tmp_path / "p.duckdb")
    df = read.table(ref, "self_prediction")
    got = {(m, lens, matrix) for m, lens, matrix in df[["model", "lens", "matrix"]].itertuples(index=False)}
    assert got == {("tied", "logit", "T"), ("tied", "tuned", "T"), ("untied", "logit", "O"), ("untied", "logit", "I"),
                   ("untied", "tuned", "O")}
    assert df["share"].between(0, 1).all() and (df["n_positions"] > 0).all()
    assert [f.name for f in figures.BY_ANALYSIS["self_prediction"] if f.available(ref, read.summary(ref))]
    assert pages.page_of("self_prediction").path == "lens"
