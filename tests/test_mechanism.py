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


def test_the_update_balanced_arm_applies_equal_update_norms_at_every_step():
    from tying.toylab.optim import UpdateBalance, adam_direction

    # AdamW's first step is the gradient's sign (up to eps): a known answer for the direction
    g = torch.tensor([[0.5, -2.0], [0.0, 3.0]])
    m, v = 0.1 * g, 0.05 * g * g
    assert torch.allclose(adam_direction(m, v, 1, (0.9, 0.95)), torch.sign(g), atol=1e-6)
    res = train_twins(_tokens(), variants=("tied",), surgery=UpdateBalance(), **TINY)["tied"]
    log = res.log
    assert len(log) == TINY["steps"] and (log["update_input_norm"] > 0).all()
    np.testing.assert_allclose(log["update_output_norm"], log["update_input_norm"], rtol=1e-6)
    # it changes the run (AdamW's own update of T differs), and T is never in the optimiser twice
    base = train_twins(_tokens(), variants=("tied",), **TINY)["tied"]
    assert not torch.equal(_weights(res)["model.embed_tokens.weight"], _weights(base)["model.embed_tokens.weight"])


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

    args = tiny(corpus, tmp_path, "--seeds", "2", "--arms", "baseline,null,size,size_update,sgd", "--sgd-lr-grid",
                "0.1,1")
    twins = ("untied", "untied_sgd")
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
    assert sorted(first.loc[~first["arm"].isin(twins), "arm"]) == ["baseline", "null"]  # the two finished runs
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
    assert ("baseline", 0) not in trained and ("null", 0) not in trained and ("untied", 0) not in trained
    assert ("untied_sgd", 0) not in trained
    assert {("size", 0), ("sgd", 0), ("baseline", 1), ("untied", 1), ("untied_sgd", 1)} <= set(trained)
    got = _rows(cache)
    arms = got[~got["arm"].isin(twins)]
    assert len(arms) == 10 and set(zip(arms["arm"], arms["seed"])) == {
        (a, s) for a in ("baseline", "null", "size", "size_update", "sgd") for s in (0, 1)}
    # the SGD arm and its twins take --sgd-steps (twice --steps by default), the others --steps
    assert set(got.loc[got["arm"].isin(("sgd", "untied_sgd")), "steps"]) == {24}
    assert set(got.loc[~got["arm"].isin(("sgd", "untied_sgd")), "steps"]) == {12}
    # the update-balanced arm applied equal update norms at every step; the others record no gap
    assert (arms.loc[arms["arm"] == "size_update", "update_norm_gap"] < 1e-5).all()
    assert arms.loc[arms["arm"] != "size_update", "update_norm_gap"].isna().all()
    # one unigram for every run, better than the uniform distribution over the 400-token vocabulary
    assert got["unigram_loss"].nunique() == 1 and 0 < got["unigram_loss"].iloc[0] < np.log(400)
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
    assert len(curve) == 10 * 3 and sorted(set(curve["step"]))[0] == 0  # 3 snapshots, the start among them
    start = curve[curve["step"] == 0]
    # at step 0 the untied twin's O is a copy of its I, drawn apart from T (independent twins): both maps
    # score alike, well below 1, and the bias is zero
    np.testing.assert_allclose(start["linear_o_t_in"], start["linear_i_t_in"], atol=1e-4)
    assert (start["linear_o_t_in"] < 0.9).all()
    np.testing.assert_allclose(start["bias"], 0.0, atol=1e-4)
    assert main(["summary", str(cache), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["kind"] == "mechanism" and len(s["mechanism"]) == 14
    for key in ("mechanism_size", "mechanism_update", "mechanism_optimizer"):
        assert s["claims"][key]["verdict"] in V.VERDICTS and s["claims"][key]["verdict"] != V.NO_DATA, key


# -- the claims ------------------------------------------------------------------------------------


def _summary(arms: dict[str, dict[str, list[float]]], loss: dict[str, float] | None = None) -> Summary:
    """A mechanism summary from per-arm, per-seed I->T and O->T (linear; overlap the same values
    halved unless given as "i_ov"/"o_ov")."""
    rows = []
    for arm, v in arms.items():
        for i, (i_t, o_t) in enumerate(zip(v["i"], v["o"])):
            i_ov, o_ov = v.get("i_ov", [x / 2 for x in v["i"]])[i], v.get("o_ov", [x / 2 for x in v["o"]])[i]
            rows.append({"arm": arm, "seed": i, "linear_i_t_in": i_t, "linear_o_t_in": o_t, "bias": o_t - i_t,
                         "overlap_t_i": i_ov, "overlap_t_o": o_ov, "bias_overlap": o_ov - i_ov, "lr": 0.3,
                         "steps": 250, "eval_loss": (loss or {}).get(arm, 5.7), "unigram_loss": 6.7})
    return Summary(kind="mechanism", mechanism=rows, mechanism_settings={"d_model": 128, "steps": 250,
                                                                           "batch_size": 16, "context": 64,
                                                                           "vocab_size": 4096, "n_layers": 4})


BASE = {"i": [0.50, 0.52, 0.51], "o": [0.88, 0.87, 0.875]}
NULL = {"i": [0.505, 0.515, 0.51], "o": [0.878, 0.872, 0.875]}  # a rerun moves each by at most 0.005


def test_toward_i_holds_only_beyond_the_null_band():
    # size raises I->T by about 0.05 in every seed, far beyond the rerun's 0.005: holds on both readings
    s = _summary({"baseline": BASE, "null": NULL, "size": {"i": [0.55, 0.57, 0.56], "o": [0.85, 0.84, 0.845]}})
    got = C.claims(s)["mechanism_size"]
    assert got.verdict == V.HOLDS and "toward I +0.050 [" in got.ours and "a rerun ±0.005" in got.ours
    assert got.ours.startswith("toy mechanism lab (1.57M parameters, 0.26M training tokens per run)")
    # the same rise, but a rerun moves I->T by 0.08: the effect does not clear the band, no claim
    wide = {"i": [0.58, 0.44, 0.51], "o": [0.878, 0.872, 0.875]}
    s = _summary({"baseline": BASE, "null": wide, "size": {"i": [0.55, 0.57, 0.56], "o": [0.88, 0.87, 0.875]}})
    assert C.claims(s)["mechanism_size"].verdict == V.NO_CLAIM


def test_an_arm_that_only_lowers_o_reads_mixed():
    # O->T falls by 0.07 in every seed, I->T unchanged: the bias falls because T left O
    s = _summary({"baseline": BASE, "null": NULL, "reach": {"i": [0.50, 0.52, 0.51], "o": [0.81, 0.80, 0.805]}})
    got = C.claims(s)["mechanism_reach"]
    assert got.verdict == V.MIXED and "T left O without coming closer to I" in got.ours
    assert "lowered, still clear of zero" in got.ours  # the bias fell beyond the band and is still clear of zero
    # T moves away from I: fails
    s = _summary({"baseline": BASE, "null": NULL, "reach": {"i": [0.40, 0.41, 0.42], "o": [0.88, 0.87, 0.875]}})
    assert C.claims(s)["mechanism_reach"].verdict == V.FAILS


def test_the_null_arms_effect_includes_zero_and_never_reads_lowered():
    rng = np.random.default_rng(0)
    i, o = rng.uniform(0.4, 0.6, 6), rng.uniform(0.8, 0.9, 6)
    noise = rng.normal(0, 0.01, (2, 6))
    noise -= noise.mean(axis=1, keepdims=True)  # a symmetric rerun: no systematic change
    runs = pd.DataFrame([{"arm": a, "seed": k, "linear_i_t_in": i[k] + (a == "null") * noise[0, k],
                          "linear_o_t_in": o[k] + (a == "null") * noise[1, k], "overlap_t_i": 0.1, "overlap_t_o": 0.3}
                         for a in ("baseline", "null") for k in range(6)])
    eff = M.effects(runs)
    null = eff[eff["arm"] == "null"]
    assert len(null) == 4 and (null["lo"] <= 0).all() and (null["hi"] >= 0).all() and (null["beyond"] == 0).all()
    # an arm that raises the bias (reversed effect) is never called "lowered"
    s = _summary({"baseline": BASE, "null": NULL, "size": {"i": [0.45, 0.46, 0.47], "o": [0.9, 0.9, 0.9]}})
    got = C.claims(s)["mechanism_size"]
    assert got.verdict == V.FAILS and "lowered" not in got.ours and "still clear of zero" in got.ours


def test_sgd_is_undertrained_unless_it_gets_as_far_below_the_unigram():
    sgd = {"i": [0.3, 0.31, 0.32], "o": [0.6, 0.62, 0.61]}
    rows = {"baseline": BASE, "sgd": sgd, "untied_sgd": {"i": [0.0] * 3, "o": [0.0] * 3}}
    got = C.claims(_summary(rows, loss={"baseline": 5.75, "sgd": 6.43}))["mechanism_optimizer"]
    assert got.verdict == V.NO_CLAIM and "no claim (undertrained: SGD's eval loss 6.43 nats is 0.27 below" in got.ours
    got = C.claims(_summary(rows, loss={"baseline": 5.75, "sgd": 5.70}))["mechanism_optimizer"]
    assert got.verdict == V.HOLDS and "against twins trained by SGD" in got.ours
    # without SGD twins (the first protocol) the SGD arm is read against AdamW twins: no claim
    rows.pop("untied_sgd")
    assert C.claims(_summary(rows, loss={"baseline": 5.75, "sgd": 5.70}))["mechanism_optimizer"].verdict == V.NO_CLAIM


def test_remains_follows_the_interval():
    from tying.cache.mechanism_claims import _remains

    assert _remains(3, 0.1, 0.2, lowered=True) == "lowered, still clear of zero"
    assert _remains(3, 0.1, 0.2, lowered=False) == "still clear of zero"
    assert _remains(3, -0.2, -0.1, lowered=True) == "reversed: below zero"
    assert "includes zero" in _remains(3, -0.1, 0.1, lowered=True)


def test_other_caches_have_no_mechanism_data():
    got = C.claims(Summary(kind="toylab"))
    for key in ("mechanism_size", "mechanism_update", "mechanism_reach", "mechanism_optimizer"):
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
    # rows in any order: only the seeds both arms have, a missing value on either side left out
    mixed = pd.DataFrame({"arm": ["size", "baseline", "size", "baseline", "baseline", "size"],
                          "seed": [7, 3, 3, 7, 9, 4], "bias": [0.25, 1.0, np.nan, 2.0, 5.0, 1.0]})
    assert M.paired(mixed, "baseline", "size") == {7: 1.75} and M.paired(mixed, "size", "null") == {}
    curves = pd.DataFrame([{"arm": "size", "seed": s, "step": st, "bias": st * (s + 1)} for s in range(2)
                           for st in (0, 10)])
    got = M.mean_curves(curves)
    assert got[got["step"] == 10]["mean"].item() == 15.0 and got[got["step"] == 0]["mean"].item() == 0.0
    with pytest.raises(Exception, match="unknown arm"):
        M.parse_arms("baseline,nope")
    assert M.parse_arms("sgd,baseline") == ["baseline", "sgd"]
