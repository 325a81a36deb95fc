"""Following a token through the hidden states (issue 53, item 3): the commitment hidden state, pinned
tokens' probabilities (from the whole softmax where a model runs, from the stored top 10 where it
does not: a gap, never a number), the lens stage's top 10 and its reuse of a trained lens."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch

from explorer.render import lens_follow
from explorer.render.shown import typed_text
from tests.test_lens import TEXT, tiny_lm
from tying.lens.evaluate import pinned_probabilities, prediction_trajectory
from tying.lens.follow import commitment, pin_ids, pinned_from_ranked
from tying.lens.lenses import LogitLens
from tying.lens.parts import find_lens_parts, residual_stream

# --------------------------------------------------------------------------- commitment (known answers)


def test_a_top1_that_never_changes_commits_at_the_input_embedding():
    top1 = np.array([["a", "b", "c"]] * 5)
    assert commitment(top1).tolist() == [0, 0, 0]


def test_a_top1_that_changes_at_the_last_state_commits_at_the_last_index():
    top1 = np.array([[1, 7], [1, 7], [1, 7], [2, 7]])  # position 0 turns at the last state; 1 never turns
    assert commitment(top1).tolist() == [3, 0]


def test_commitment_is_the_start_of_the_last_run_not_the_first_agreement():
    # position 0 agrees at state 0, leaves, and returns at 3: it commits at 3; one state: 0
    top1 = np.array([[5], [6], [6], [5], [5]])
    assert commitment(top1).tolist() == [3]
    assert commitment(np.array([[9, 9]])).tolist() == [0, 0]
    with pytest.raises(ValueError):
        commitment(np.array([1, 2, 3]))


def test_commitment_matches_a_brute_force_scan():
    rng = np.random.default_rng(0)
    top1 = rng.integers(0, 3, size=(7, 40))
    brute = [min(s for s in range(7) if all(top1[t, p] == top1[-1, p] for t in range(s, 7))) for p in range(40)]
    assert commitment(top1).tolist() == brute


# --------------------------------------------------------------------------- pins from stored rows


def test_a_pin_outside_the_stored_top_k_is_a_gap_with_its_bound():
    preds = np.array([["a", "b", "c"], ["b", "c", "d"]], dtype=object)
    probs = np.array([[0.5, 0.3, 0.1], [0.6, 0.2, 0.05]])
    prob, bound = pinned_from_ranked(preds, probs, "a")
    assert prob[0] == 0.5 and np.isnan(prob[1])  # never an invented number
    assert np.isnan(bound[0]) and bound[1] == 0.05  # the pin's probability is at most the 10th's
    assert pin_ids(["x", " a", "b", " a"], [" a", "zz"]) == {" a": 1, "zz": None}


def test_pinned_stored_and_its_gaps_line():
    rows = pd.DataFrame([{"model": m, "lens": "tuned", "layer": layer, "position": 0, "rank": r + 1,
                          "prediction": p, "prob": pr}
                         for m in ("tied", "untied") for layer in range(3)
                         for r, (p, pr) in enumerate([("␣x" if layer else "␣y", 0.6), ("z", 0.1)])])
    got = lens_follow.pinned_stored(rows, ["␣x"], 0)
    tied = got[got["model"] == "tied"].sort_values("layer")
    assert np.isnan(tied["prob"].iloc[0]) and tied["bound"].iloc[0] == 0.1 and tied["prob"].tolist()[1:] == [0.6, 0.6]
    line = lens_follow.gaps_line(got, 10)
    assert '"␣x" in 2 of 6' in line and "top 10" in line
    spec = lens_follow.pinned_chart(got, "␣x").to_dict()
    marks = [layer["mark"]["type"] if isinstance(layer["mark"], dict) else layer["mark"] for layer in spec["layer"]]
    assert marks == ["line", "point", "point"]  # the known values' line and points, the gaps' bounds


def test_commitment_rows_tied_beside_untied():
    rows = pd.DataFrame([{"model": m, "lens": "tuned", "layer": layer, "position": p, "token": f"t{p}", "rank": 1,
                          "prediction": ("A" if layer >= (1 if m == "tied" else 2) else "B") if p == 0 else "C",
                          "prob": 0.5} for m in ("tied", "untied") for layer in range(3) for p in range(2)])
    strip = lens_follow.commitment_rows(rows)
    got = {(r.model, r.position): r.commits for r in strip.itertuples()}
    assert got == {("tied", 0): 1, ("tied", 1): 0, ("untied", 0): 2, ("untied", 1): 0}
    spec = lens_follow.commitment_strip(strip).to_dict()
    assert spec["layer"][0]["encoding"]["y"]["sort"] == ["tied", "untied"]


def test_a_pin_is_read_back_as_the_model_decodes_it():
    assert typed_text("␣Paris") == " Paris" and typed_text("a↵") == "a\n" and typed_text("x⇥␍") == "x\t\r"


# --------------------------------------------------------------------------- the pinned curve (a tiny model)


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


def test_the_pinned_curve_equals_the_trajectory_and_a_brute_force_softmax(tokenizer):
    """Every pinned probability, read from the whole softmax, is the trajectory's prob where the
    token is in the top k, and the brute-force softmax of the lens's logits everywhere."""
    model = tiny_lm("llama", vocab_size=len(tokenizer))
    parts = find_lens_parts(model)
    traj = prediction_trajectory(model, tokenizer, TEXT, LogitLens(), top_k=10, max_tokens=12)
    pins = sorted({tokenizer.convert_tokens_to_ids(t) for t in ("Ġthe", "Ġa", "e")} |
                  {int(tokenizer(traj["prediction"].iloc[0])["input_ids"][0])})
    got = pinned_probabilities(model, tokenizer, TEXT, LogitLens(), pins, max_tokens=12)
    assert len(got) == 12 * parts.n_hidden * len(pins)
    ids = tokenizer(TEXT)["input_ids"][:12]
    with torch.no_grad():
        hs = residual_stream(model, parts, torch.tensor([ids]))
        for layer in range(parts.n_hidden):  # brute force: the softmax of the logit lens, token by token
            logits = parts.unembed(parts.final_norm(hs[layer][0])).double()
            expected = torch.exp(logits - torch.logsumexp(logits, -1, keepdim=True))[:, pins].numpy()
            at = got[got["layer"] == layer].sort_values(["position", "token_id"])
            np.testing.assert_allclose(at["prob"].to_numpy().reshape(12, len(pins)), expected, rtol=1e-5, atol=1e-7)
    decoded = {i: tokenizer.decode([i]) for i in pins}
    joined = got.assign(prediction=got["token_id"].map(decoded)).merge(
        traj, on=["position", "layer", "lens", "prediction"], suffixes=("", "_traj"))
    assert len(joined) > 0  # some pins are in some cells' top 10 ...
    np.testing.assert_allclose(joined["prob"], joined["prob_traj"], rtol=1e-6)  # ... and read the same there


def test_the_worker_follows_pins_from_the_full_distribution(tmp_path):
    """serve-trajectory's answer with pins: each pin's probability at every cell equals the
    trajectory's where it is in the top 10; a pin no single token is named, never drawn."""
    from pathlib import Path

    from precompute.serve import answer
    from precompute.trajectory import Tracer

    demo = Path(__file__).resolve().parent.parent / "cache" / "demo.duckdb"
    if not demo.exists():
        pytest.skip("the shipped demo cache is absent")
    tracer = Tracer(demo)
    text = "def main(): return self.x == 0"
    out = json.loads(answer(tracer, json.dumps({"id": 1, "text": text, "pins": [" self", "(", "no such token"]})))
    rows, pinned = pd.DataFrame(out["columns"]), pd.DataFrame(out["pinned"])
    assert set(rows["rank"]) == set(range(1, 11))  # the top 10 by default
    assert out["unknown"] == {"tied": ["no such token"], "untied": ["no such token"]}
    assert set(pinned["pin"]) == {" self", "("} and set(pinned["lens"]) == {"tuned", "logit"}
    hit = pinned.rename(columns={"pin": "prediction"}).merge(rows, on=["model", "lens", "layer", "position",
                                                                       "prediction"], suffixes=("", "_top"))
    assert len(hit) > 0
    np.testing.assert_allclose(hit["prob"], hit["prob_top"], rtol=1e-5)
    bad = json.loads(answer(tracer, json.dumps({"id": 2, "text": text, "pins": "x"})))
    assert "pins must be a list" in bad["error"]


# --------------------------------------------------------------------------- the lens stage's top 10


def test_a_lens_saved_under_another_top_k_is_reused_not_retrained(tmp_path):
    """The lens stage stores a top 10; a lens saved when it stored a top 5 (the same training
    options and budget) is found, so raising top_k retrains nothing; another budget is not."""
    from dataclasses import replace
    from types import SimpleNamespace

    from precompute.lens import LensOptions, LensSetup
    from tying.lens import LensBudget
    from tying.lens.files import save_lens
    from tying.lens.lenses import TunedLens

    assert LensOptions().top_k == 10
    old, budget = replace(LensOptions(), top_k=5), LensBudget(steps=3, tokens_per_step=64, text_tokens=640)
    saved = save_lens(TunedLens(2, 4), tmp_path / "tied-0123456789ab.safetensors", "fp",
                      {"role": "tied", "options": old.params(), "budget": budget.to_dict()})
    setup, lm = LensSetup(LensOptions(), tmp_path, "cpu"), SimpleNamespace(role="tied")
    assert setup.trained_alike(lm, budget) == saved
    assert setup.trained_alike(lm, replace(budget, steps=4)) is None
    assert setup.trained_alike(SimpleNamespace(role="untied"), budget) is None
    assert LensSetup(replace(LensOptions(), seq_len=64), tmp_path, "cpu").trained_alike(lm, budget) is None
