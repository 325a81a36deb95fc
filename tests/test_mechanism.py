"""The mechanism lab: the gradient surgery's known answers, `precompute mechanism` end to end
(resume, bad input), and its claims decided from per-seed numbers."""

import json

import duckdb
import numpy as np
import pandas as pd
import pytest
import torch
import torch.nn.functional as F

from precompute.cli import main
from tests.test_sweep import corpus  # noqa: F401 (a fixture)
from tying.analysis import mechanism as M
from tying.cache import claims as C
from tying.cache import verdicts as V
from tying.cache.summary_types import Summary
from tying.toylab.provenance import GradientProvenance
from tying.toylab.surgery import Surgery, balanced, masked, output_side, present_rows
from tying.toylab.train import train_twins

# -- the surgery: pure parts -----------------------------------------------------------------------


def test_balanced_has_the_target_norm_and_masked_is_zero_off_the_rows():
    g = torch.randn(40, 8, generator=torch.Generator().manual_seed(0))
    assert torch.linalg.vector_norm(balanced(g, 3.5)).item() == pytest.approx(3.5, rel=1e-6)
    # same direction: a positive multiple
    b = balanced(g, 3.5)
    assert torch.allclose(b / torch.linalg.vector_norm(b), g / torch.linalg.vector_norm(g), atol=1e-6)
    assert torch.equal(balanced(torch.zeros(3, 2), 1.0), torch.zeros(3, 2))  # zero stays zero
    rows = present_rows(torch.tensor([[3, 5], [5, 39]]), 40)
    assert rows.nonzero().flatten().tolist() == [3, 5, 39]
    m = masked(g, rows)
    assert torch.equal(m[~rows], torch.zeros_like(m[~rows])) and torch.equal(m[rows], g[rows])


def test_output_side_of_each_arm():
    gen = torch.Generator().manual_seed(1)
    g_in, g_out = torch.randn(30, 4, generator=gen) * 0.1, torch.randn(30, 4, generator=gen) * 5
    rows = torch.zeros(30, dtype=torch.bool)
    rows[[0, 7, 9]] = True
    norm_in = torch.linalg.vector_norm(g_in).item()
    assert torch.equal(output_side(g_in, g_out, rows, size=False, reach=False), g_out)
    assert torch.linalg.vector_norm(output_side(g_in, g_out, None, size=True, reach=False)).item() == \
        pytest.approx(norm_in, rel=1e-6)
    both = output_side(g_in, g_out, rows, size=True, reach=True)
    assert torch.linalg.vector_norm(both).item() == pytest.approx(norm_in, rel=1e-6)
    assert not both[~rows].any()


def _toy_tied(seed=0, V_=25, d=6):
    """A tied toy: W looked up, a nonlinearity, W again as the output projection."""
    gen = torch.Generator().manual_seed(seed)
    W = torch.nn.Parameter(torch.randn(V_, d, generator=gen) * 0.3)
    A = torch.randn(d, d, generator=gen)
    ids = torch.tensor([[1, 4, 4, 7], [2, 1, 9, 3]])
    targets = torch.tensor([[4, 4, 7, 0], [1, 9, 3, 12]])
    return W, A, ids, targets


def _loss(W, A, ids, targets, W_out=None):
    h = torch.tanh(W[ids] @ A)
    logits = h @ (W if W_out is None else W_out).T
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


@pytest.mark.parametrize("size, reach", [(True, False), (False, True), (True, True)])
def test_apply_matches_autograd_with_the_output_side_rescaled_or_masked(size, reach):
    """Surgery.apply on W.grad = g_in + g_out equals autograd of a forward pass whose output
    projection lets through only the arm's share of the gradient (same forward value)."""
    W, A, ids, targets = _toy_tied()
    # the two sides separately, by autograd: input side through W[ids] only, output side through W.T only
    g_in = torch.autograd.grad(_loss(W, A, ids, targets, W_out=W.detach()), W)[0]
    g_out = torch.autograd.grad(_loss_out_only(W, A, ids, targets), W)[0]
    _loss(W, A, ids, targets).backward()
    assert torch.allclose(W.grad, g_in + g_out, atol=1e-6)
    Surgery(size=size, reach=reach).apply(W, g_in, g_out, ids)
    rows = present_rows(ids, W.shape[0])
    m = rows.float()[:, None] if reach else torch.ones(W.shape[0], 1)
    c = torch.linalg.vector_norm(g_in) / torch.linalg.vector_norm(g_out * m) if size else torch.tensor(1.0)
    # reference: the output projection's weight is W on the kept rows (times c) and a constant elsewhere
    W2 = torch.nn.Parameter(W.detach().clone())
    W_out = c * m * W2 + (1 - c * m) * W2.detach()
    _loss(W2, A, ids, targets, W_out=W_out).backward()
    assert torch.allclose(W.grad, W2.grad, atol=1e-6)
    if size:  # the output side let through has the input side's norm
        assert torch.linalg.vector_norm(W.grad - g_in).item() == pytest.approx(torch.linalg.vector_norm(g_in).item(),
                                                                              rel=1e-5)
    if reach:  # rows absent from the batch get exactly nothing
        assert not W.grad[~rows].any()


def _loss_out_only(W, A, ids, targets):
    h = torch.tanh(W.detach()[ids] @ A)
    logits = h @ W.T
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1))


def _tokens(n=3000, vocab=60, seed=0):
    return np.random.default_rng(seed).integers(0, vocab, n)


TINY = dict(vocab_size=60, d_model=16, n_layers=1, n_heads=2, steps=6, batch_size=4, context=8, checkpoint_steps=[6])


def _weights(res):
    return {k: v.detach().clone() for k, v in res.model.state_dict().items()}


def test_the_identity_surgery_is_the_baseline_bit_for_bit():
    base = train_twins(_tokens(), variants=("tied",), **TINY)["tied"]
    same = train_twins(_tokens(), variants=("tied",), surgery=Surgery(), **TINY)["tied"]
    a, b = _weights(base), _weights(same)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert base.log["loss"].tolist() == same.log["loss"].tolist()
    # the surgery changes the run when it does something
    size = train_twins(_tokens(), variants=("tied",), surgery=Surgery(size=True), **TINY)["tied"]
    assert not torch.equal(_weights(size)["model.embed_tokens.weight"], a["model.embed_tokens.weight"])


def test_in_a_llama_reach_zeroes_absent_rows_and_size_gives_the_input_norm():
    from tying.toylab.model import build_twins

    model = build_twins({"vocab_size": 60, "d_model": 16, "n_layers": 1, "n_heads": 2, "d_ff": None, "context": 8}, 0,
                        variants=("tied",))["tied"]
    ids = torch.tensor(_tokens(40)[:36].reshape(4, 9))
    W = model.get_input_embeddings().weight
    for surgery in (Surgery(reach=True), Surgery(size=True)):
        model.zero_grad()
        with GradientProvenance(model) as prov:
            logits = model(input_ids=ids[:, :-1]).logits
            F.cross_entropy(logits.reshape(-1, 60), ids[:, 1:].reshape(-1)).backward()
            before = W.grad.clone()
            applied = surgery.apply(W, prov.g_in * prov.scale, prov.g_out, ids[:, :-1])
        rows = present_rows(ids[:, :-1], 60)
        if surgery.reach:
            assert 0 < rows.sum() < 60 and not W.grad[~rows].any()
            assert torch.equal(W.grad[rows], before[rows])  # kept rows: untouched, bit for bit
        else:
            n_in = torch.linalg.vector_norm(prov.g_in).item()
            assert applied == pytest.approx(n_in, rel=1e-5)
            assert torch.linalg.vector_norm(W.grad - prov.g_in).item() == pytest.approx(n_in, rel=1e-4)


def test_sgd_is_an_optimizer_choice_and_a_bad_one_is_refused():
    res = train_twins(_tokens(), variants=("tied",), optimizer="sgd", lr=0.3, **TINY)["tied"]
    assert res.settings["optimizer"] == "sgd" and np.isfinite(res.eval_loss)
    with pytest.raises(ValueError, match="optimizer"):
        train_twins(_tokens(), variants=("tied",), optimizer="lion", **TINY)


# -- the command -----------------------------------------------------------------------------------


def tiny(corpus, cache_dir, *extra):  # noqa: F811 (corpus: the fixture's value)
    return ["mechanism", "--cache-dir", str(cache_dir), "--corpus", str(corpus), "--vocab-size", "400", "--d-model",
            "16", "--n-layers", "1", "--n-heads", "2", "--context", "16", "--batch-size", "4", "--steps", "12",
            "--checkpoints", "3", *extra]


def _rows(path, table="mechanism"):
    con = duckdb.connect(str(path), read_only=True)
    try:
        return con.execute(f"SELECT * FROM {table}").df()
    finally:
        con.close()


@pytest.mark.parametrize("extra, message", [(["--arms", "baseline,lion"], "unknown arm 'lion'"),
                                            (["--seeds", "1"], "--seeds must be at least 2")])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, extra, message):
    rc = main(["mechanism", "--cache-dir", str(tmp_path / "c"), *extra])
    err = capsys.readouterr().err.strip()
    assert rc == 2 and message in err and len(err.splitlines()) == 1
    assert not (tmp_path / "c").exists() or not any((tmp_path / "c").iterdir())


@pytest.mark.slow
def test_end_to_end_rows_curves_claims_and_resume(corpus, tmp_path, capsys, monkeypatch):  # noqa: F811
    from precompute import mechanism as PM

    args = tiny(corpus, tmp_path, "--seeds", "2", "--arms", "baseline,size,reach,sgd", "--sgd-lr-grid", "0.1,1")
    calls = []
    real = PM.MechanismRun.measure

    def measure_then_stop(self, arm, seed, *a):
        calls.append((arm, seed))
        if len(calls) == 3:
            raise KeyboardInterrupt  # killed while the third run is measured
        return real(self, arm, seed, *a)

    monkeypatch.setattr(PM.MechanismRun, "measure", measure_then_stop)
    assert main(args) == 130  # interrupted: the cache keeps every run finished before
    cache = tmp_path / "mechanism.duckdb"
    first = _rows(cache)
    assert sorted(first.loc[first["arm"] != "untied", "arm"]) == ["baseline", "size"]  # the two finished runs
    monkeypatch.setattr(PM.MechanismRun, "measure", real)
    trained = []
    real_train = PM.MechanismRun._train

    def counting(self, ids, n_vocab, arm, seed, steps=None, **kw):
        if steps is None:  # a full run (not an estimate's timed 4 steps)
            trained.append((arm, seed))
        return real_train(self, ids, n_vocab, arm, seed, steps=steps, **kw)

    monkeypatch.setattr(PM.MechanismRun, "_train", counting)
    capsys.readouterr()
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "2 runs already in" in err and "estimated training time" in err
    # finished arms are not trained again; the untied twin of seed 0 is read back from its snapshots
    assert ("baseline", 0) not in trained and ("size", 0) not in trained and ("untied", 0) not in trained
    assert {("reach", 0), ("sgd", 0), ("baseline", 1), ("untied", 1)} <= set(trained)
    got = _rows(cache)
    arms = got[got["arm"] != "untied"]
    assert len(arms) == 8 and set(zip(arms["arm"], arms["seed"])) == {(a, s) for a in ("baseline", "size", "reach",
                                                                                        "sgd") for s in (0, 1)}
    np.testing.assert_allclose(arms["bias"], arms["linear_o_t_in"] - arms["linear_i_t_in"])
    np.testing.assert_allclose(arms["bias_overlap"], arms["overlap_t_o"] - arms["overlap_t_i"])
    # the size arm's applied output share is one half at every step, by construction
    assert np.allclose(arms.loc[arms["arm"] == "size", "output_share_applied_early"], 0.5, atol=1e-4)
    assert (arms.loc[arms["arm"] == "baseline", "output_share_applied_early"]
            == arms.loc[arms["arm"] == "baseline", "output_share_early"]).all()
    probes = _rows(cache, "mechanism_probe")
    assert sorted(probes["lr"]) == [0.1, 1.0]
    assert (arms.loc[arms["arm"] == "sgd", "lr"] == probes.loc[probes["loss"].idxmin(), "lr"]).all()
    curve = _rows(cache, "mechanism_curve")
    assert len(curve) == 8 * 3 and sorted(set(curve["step"]))[0] == 0  # 3 snapshots, the start among them
    start = curve[curve["step"] == 0]
    # at step 0 the untied twin's O is a copy of its I, drawn apart from T (independent twins): both maps
    # score alike, well below 1, and the bias is zero
    np.testing.assert_allclose(start["linear_o_t_in"], start["linear_i_t_in"], atol=1e-4)
    assert (start["linear_o_t_in"] < 0.9).all()
    np.testing.assert_allclose(start["bias"], 0.0, atol=1e-4)
    assert main(["summary", str(cache), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["kind"] == "mechanism" and len(s["mechanism"]) == 10
    for key in ("mechanism_size", "mechanism_reach", "mechanism_optimizer"):
        assert s["claims"][key]["verdict"] in V.VERDICTS and s["claims"][key]["verdict"] != V.NO_DATA, key


# -- the claims ------------------------------------------------------------------------------------


def _summary(bias: dict[str, list[float]], overlap: dict[str, list[float]] | None = None) -> Summary:
    overlap = overlap or bias
    rows = [{"arm": arm, "seed": i, "bias": b, "bias_overlap": overlap[arm][i], "lr": 0.3}
            for arm, values in bias.items() for i, b in enumerate(values)]
    return Summary(kind="mechanism", mechanism=rows, mechanism_settings={"d_model": 128, "steps": 250,
                                                                           "batch_size": 16, "context": 64,
                                                                           "vocab_size": 4096, "n_layers": 4})


def test_claims_follow_the_intervals():
    base = [0.30, 0.32, 0.31]
    # size removes most of the bias, consistently: holds, and what remains is still clear of zero
    s = _summary({"baseline": base, "size": [0.10, 0.11, 0.12], "reach": [0.31, 0.29, 0.33],
                  "sgd": [0.2, 0.22, 0.21]})
    got = C.claims(s)
    assert got["mechanism_size"].verdict == V.HOLDS and "lowered, not removed" in got["mechanism_size"].ours
    assert "65% [" in got["mechanism_size"].ours  # (0.31 - 0.11) / 0.31 in the mean
    assert got["mechanism_size"].ours.startswith("toy mechanism lab (1.57M parameters, 0.26M training tokens per run)")
    assert got["mechanism_reach"].verdict == V.NO_CLAIM  # differences +-0.02 around zero
    assert got["mechanism_optimizer"].verdict == V.HOLDS
    # an arm that raises the bias in every seed: does not hold; an SGD bias below zero: does not hold
    s = _summary({"baseline": base, "size": [0.40, 0.41, 0.43], "sgd": [-0.2, -0.22, -0.21]})
    got = C.claims(s)
    assert got["mechanism_size"].verdict == V.FAILS and got["mechanism_optimizer"].verdict == V.FAILS
    assert got["mechanism_reach"].verdict == V.NO_DATA and "--arms baseline,reach" in got["mechanism_reach"].note
    # the readings disagree (linear lowers, overlap raises): mixed, never holds
    s = _summary({"baseline": base, "size": [0.1, 0.1, 0.1]}, {"baseline": base, "size": [0.5, 0.52, 0.51]})
    assert C.claims(s)["mechanism_size"].verdict == V.MIXED
    # removed: the remainder's interval includes zero
    s = _summary({"baseline": base, "size": [0.01, -0.02, 0.0]})
    assert "interval includes zero" in C.claims(s)["mechanism_size"].ours


def test_other_caches_have_no_mechanism_data():
    got = C.claims(Summary(kind="toylab"))
    for key in ("mechanism_size", "mechanism_reach", "mechanism_optimizer"):
        assert got[key].verdict == V.NO_DATA and got[key].needs == "mechanism" and "precompute mechanism" in got[key].note


def test_per_arm_and_curves_known_answers():
    runs = pd.DataFrame([{"arm": "baseline", "seed": s, "bias": b} for s, b in enumerate([1.0, 2.0, 3.0])]
                        + [{"arm": "size", "seed": s, "bias": b} for s, b in enumerate([0.5, 1.0, 1.5])])
    table = M.per_arm(runs).set_index("arm")
    assert table.loc["baseline", "mean"] == 2.0 and table.loc["baseline", "n"] == 3
    half = 4.302652729911275 * 1.0 / np.sqrt(3)  # t(0.975, 2 df) x sd / sqrt(n)
    assert table.loc["baseline", "lo"] == pytest.approx(2.0 - half) and table.loc["baseline", "hi"] == pytest.approx(
        2.0 + half)
    assert M.paired(runs, "baseline", "size") == {0: 0.5, 1: 1.0, 2: 1.5}
    curves = pd.DataFrame([{"arm": "size", "seed": s, "step": st, "bias": st * (s + 1)} for s in range(2)
                           for st in (0, 10)])
    got = M.mean_curves(curves)
    assert got[got["step"] == 10]["mean"].item() == 15.0 and got[got["step"] == 0]["mean"].item() == 0.0
    with pytest.raises(Exception, match="unknown arm"):
        M.parse_arms("baseline,nope")
    assert M.parse_arms("sgd,baseline") == ["baseline", "sgd"]
