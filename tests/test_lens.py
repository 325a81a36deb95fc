"""Logit lens and tuned lens (tying/lens/): the maths, the indexing, training, saving, bad input."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from tests.tiny_models import FAMILIES, tiny_config
from tying.analysis.convergence import convergence
from tying.lens.batches import text_batches
from tying.lens.evaluate import evaluate_lens, prediction_trajectory
from tying.lens.files import load_lens, read_lens_meta, save_lens, unembedding_fingerprint
from tying.lens.lenses import LogitLens, TunedLens, kl_bits
from tying.lens.parts import find_lens_parts, residual_stream
from tying.lens.train import train_tuned_lens

TEXT = (
    "The tied matrix ends up looking like an untied output matrix, because the gradients "
    "that reach it through the output softmax dominate those from the input lookup. "
    "Every output row gets a gradient at every step; an input row only when its token occurs."
)


def tiny_lm(family: str = "llama", tied: bool = True, *, n_layers: int = 2, vocab_size: int = 300,
            init: float = 0.2, seed: int = 0):
    """A random-weight causal LM built in memory. ``init`` (the initializer range) is large
    enough that its output distributions are far from uniform, so KLs are not all ~0."""
    from transformers import AutoModelForCausalLM

    config = tiny_config(family, vocab_size=vocab_size, d=32, n_layers=n_layers, tied=tied)
    config.initializer_range = init
    torch.manual_seed(seed)
    return AutoModelForCausalLM.from_config(config).eval()


def random_ids(vocab_size: int = 300, shape=(2, 24), seed: int = 0) -> torch.Tensor:
    return torch.randint(0, vocab_size, shape, generator=torch.Generator().manual_seed(seed))


@pytest.fixture(scope="module")
def tokenizer(tokenizer_dir):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(tokenizer_dir)


# --------------------------------------------------------------------------- KL maths


def test_kl_of_a_distribution_with_itself_is_zero():
    gen = torch.Generator().manual_seed(1)
    for scale in (0.1, 1.0, 30.0):
        logits = torch.randn(5, 7, 50, generator=gen) * scale
        assert torch.equal(kl_bits(logits, logits), torch.zeros(5, 7))
    masked = torch.tensor([[0.0, -math.inf, 2.0]])
    assert kl_bits(masked, masked).item() == 0.0


def test_kl_is_non_negative_and_matches_the_definition():
    gen = torch.Generator().manual_seed(2)
    for trial in range(40):
        vocab = int(torch.randint(2, 200, (1,), generator=gen))
        scale = float(torch.rand(1, generator=gen)) * 10
        p = torch.randn(8, vocab, generator=gen) * scale
        q = torch.randn(8, vocab, generator=gen) * scale + (trial % 3)
        kl = kl_bits(p, q)
        assert kl.shape == (8,) and kl.dtype == torch.float32
        assert (kl >= 0).all()
        pp = torch.softmax(p.double(), -1)
        qq = torch.softmax(q.double(), -1)
        direct = (pp * (pp.log() - qq.log())).sum(-1) / math.log(2)
        np.testing.assert_allclose(kl.numpy(), direct.numpy(), rtol=1e-4, atol=1e-5)


def test_kl_in_bits_of_a_known_pair():
    # p puts everything on token 0, q is uniform over 2 tokens: KL = log2(2) = 1 bit
    p = torch.tensor([0.0, -math.inf])
    q = torch.tensor([0.0, 0.0])
    assert kl_bits(p, q).item() == pytest.approx(1.0, abs=1e-6)
    # uniform over 4 vs one token at probability 1/2, three at 1/6
    q2 = torch.log(torch.tensor([0.5, 1 / 6, 1 / 6, 1 / 6]))
    expected = 0.25 * (math.log2(0.25 / 0.5) + 3 * math.log2(0.25 * 6))
    assert kl_bits(torch.zeros(4), q2).item() == pytest.approx(expected, abs=1e-6)
    with pytest.raises(ValueError, match="different shapes"):
        kl_bits(torch.zeros(3), torch.zeros(4))


# --------------------------------------------------------------------------- parts and hidden states


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("family", FAMILIES)
def test_logit_lens_of_the_last_hidden_state_is_the_model_output(family, tied):
    model = tiny_lm(family, tied)
    parts = find_lens_parts(model)
    assert parts.n_hidden == 3 and parts.d_model == 32
    assert isinstance(parts.final_hidden_is_normed, bool)
    ids = random_ids()
    with torch.no_grad():
        logits = model(ids).logits
        hs = residual_stream(model, parts, ids)
        last = LogitLens().logits(parts, hs[-1], parts.n_hidden - 1)
    torch.testing.assert_close(last, logits, rtol=1e-5, atol=1e-5)
    assert kl_bits(logits, last).max().item() < 1e-6
    table = evaluate_lens(model, [ids])
    assert list(table.columns) == ["layer", "lens", "kl_mean", "kl_std", "n_tokens"]
    assert table["kl_mean"].iloc[-1] < 1e-5
    assert (table["kl_mean"].iloc[:-1] > 1e-3).all()  # the earlier hidden states are not trivially right
    assert (table["n_tokens"] == ids.numel()).all()


def test_hidden_state_l_is_the_output_of_block_l():
    model = tiny_lm("llama", n_layers=3)
    parts = find_lens_parts(model)
    ids = random_ids()
    outputs = {}

    def keep(i):
        return lambda _module, _args, out: outputs.__setitem__(i, out[0] if isinstance(out, tuple) else out)

    hooks = [block.register_forward_hook(keep(i)) for i, block in enumerate(model.model.layers, start=1)]
    try:
        hs = residual_stream(model, parts, ids)
    finally:
        for h in hooks:
            h.remove()
    assert len(hs) == 4
    torch.testing.assert_close(hs[0], model.model.embed_tokens(ids))
    for layer in (1, 2, 3):
        torch.testing.assert_close(hs[layer], outputs[layer])  # the last one before the final norm


def test_evaluate_lens_is_the_mean_and_spread_of_kl_bits_over_tokens():
    model = tiny_lm("gpt2", n_layers=3)
    parts = find_lens_parts(model)
    lens = TunedLens.for_parts(parts)
    with torch.no_grad():
        for p in lens.parameters():
            p.normal_(std=0.05)
    batches = [random_ids(shape=(2, 10), seed=4), random_ids(shape=(1, 7), seed=5)]
    table = evaluate_lens(model, batches, [lens, LogitLens()])
    assert len(table) == 2 * parts.n_hidden and (table["n_tokens"] == 27).all()
    with torch.no_grad():
        streams = [residual_stream(model, parts, ids) for ids in batches]
        final = torch.cat([model(ids).logits.reshape(-1, 300) for ids in batches])
        for name, tl in (("tuned", lens), ("logit", LogitLens())):
            for layer in range(parts.n_hidden):
                q = torch.cat([tl.logits(parts, hs[layer].reshape(-1, 32), layer) for hs in streams])
                kl = kl_bits(final, q).double()
                row = table[(table.layer == layer) & (table.lens == name)].iloc[0]
                assert row.kl_mean == pytest.approx(kl.mean().item(), abs=1e-5)
                assert row.kl_std == pytest.approx(kl.std(unbiased=False).item(), abs=1e-4)
    chunked = evaluate_lens(model, batches, [lens, LogitLens()], chunk_tokens=4)
    np.testing.assert_allclose(chunked["kl_mean"], table["kl_mean"], atol=1e-6)


class ToyLM(nn.Module):
    """A causal LM outside transformers: returns its hidden states *without* the final norm."""

    def __init__(self, vocab=40, d=8, n_layers=2, logit_scale=1.0):
        super().__init__()
        torch.manual_seed(0)
        self.embed = nn.Embedding(vocab, d)
        self.blocks = nn.ModuleList(nn.Linear(d, d) for _ in range(n_layers))
        self.model = nn.Module()
        self.model.norm = nn.LayerNorm(d)
        self.lm_head = nn.Linear(d, vocab, bias=False)
        self.logit_scale = logit_scale

    def get_output_embeddings(self):
        return self.lm_head

    def forward(self, input_ids, output_hidden_states=False, use_cache=None):
        h = self.embed(input_ids)
        hs = [h]
        for block in self.blocks:
            h = h + torch.tanh(block(h))
            hs.append(h)
        logits = self.lm_head(self.model.norm(h)) * self.logit_scale
        return SimpleNamespace(hidden_states=tuple(hs), logits=logits)


def test_a_model_whose_last_hidden_state_is_not_normed():
    model = ToyLM()
    parts = find_lens_parts(model)
    assert parts.final_hidden_is_normed is False and parts.n_hidden == 3 and parts.d_model == 8
    table = evaluate_lens(model, [random_ids(40, (2, 9))])
    assert table["kl_mean"].iloc[-1] < 1e-5 and table["kl_mean"].iloc[0] > 1e-3


def test_models_the_lens_cannot_read_are_refused():
    class NoNorm(nn.Module):
        def __init__(self):
            super().__init__()
            self.lm_head = nn.Linear(4, 10)

        def get_output_embeddings(self):
            return self.lm_head

    class NoUnembedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.model = nn.Module()
            self.model.norm = nn.LayerNorm(4)

    with pytest.raises(ValueError, match="cannot find the final norm of NoNorm"):
        find_lens_parts(NoNorm())
    with pytest.raises(ValueError, match="cannot find the unembedding of NoUnembedding"):
        find_lens_parts(NoUnembedding())
    with pytest.raises(ValueError, match="not unembedding\\(final_norm\\(h\\)\\)"):
        find_lens_parts(ToyLM(logit_scale=2.0))


# --------------------------------------------------------------------------- the tuned lens


def test_an_untrained_tuned_lens_is_exactly_the_logit_lens():
    model = tiny_lm("gpt_neox")
    parts = find_lens_parts(model)
    lens = TunedLens.for_parts(parts)
    ids = random_ids()
    hs = residual_stream(model, parts, ids)
    with torch.no_grad():
        for layer in range(parts.n_hidden):
            assert torch.equal(lens.logits(parts, hs[layer], layer), LogitLens().logits(parts, hs[layer], layer))
    table = evaluate_lens(model, [ids], [lens, LogitLens()]).pivot(index="layer", columns="lens", values="kl_mean")
    assert (table["tuned"] == table["logit"]).all()


def test_the_translator_of_hidden_state_l_acts_on_hidden_state_l_only():
    model = tiny_lm("qwen3", n_layers=3)
    parts = find_lens_parts(model)
    ids = random_ids()
    gen = torch.Generator().manual_seed(3)
    for planted in range(parts.n_hidden):
        lens = TunedLens.for_parts(parts)
        with torch.no_grad():
            lens.translators[planted].bias.copy_(torch.randn(parts.d_model, generator=gen) * 5)
        table = evaluate_lens(model, [ids], [lens, LogitLens()], parts=parts)
        wide = table.pivot(index="layer", columns="lens", values="kl_mean")
        changed = wide.index[(wide["tuned"] - wide["logit"]).abs() > 1e-4].tolist()
        assert changed == [planted]


def test_training_lowers_the_tuned_lens_kl_and_leaves_the_model_alone(tokenizer):
    model = tiny_lm("llama", n_layers=3, vocab_size=len(tokenizer))
    model.lm_head.weight.requires_grad_(True)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    batches = text_batches(tokenizer, [TEXT, TEXT[::-1]], seq_len=32, batch_size=4)
    seen = []
    lens, curve = train_tuned_lens(model, batches, steps=12, progress=lambda *a: seen.append(a))
    assert list(curve.columns) == ["step", "layer", "kl_bits"]
    assert len(curve) == 12 * 4 and seen[-1][:2] == (12, 12)
    first = curve[curve.step == 0].set_index("layer")["kl_bits"]
    final = curve[curve.step == 11].set_index("layer")["kl_bits"]
    assert (final.iloc[:-1] < first.iloc[:-1]).all()
    table = evaluate_lens(model, batches, [lens, LogitLens()]).pivot(index="layer", columns="lens", values="kl_mean")
    assert (table["tuned"].iloc[:-1] < table["logit"].iloc[:-1]).all()
    assert table["tuned"].iloc[-1] < 1e-5
    after = model.state_dict()
    assert all(torch.equal(before[k], after[k]) for k in before)
    assert model.lm_head.weight.requires_grad and not model.training
    with pytest.raises(ValueError, match="steps must be at least 1"):
        train_tuned_lens(model, batches, steps=0)


def test_training_in_token_blocks_gives_the_same_lens():
    model = tiny_lm("gpt_neox")
    batches = [random_ids(shape=(2, 12), seed=6)]
    whole, curve = train_tuned_lens(model, batches, steps=2, optimizer="adam", lr=1e-2)
    blocks, curve_blocks = train_tuned_lens(model, batches, steps=2, optimizer="adam", lr=1e-2, chunk_tokens=5)
    for a, b in zip(whole.parameters(), blocks.parameters()):
        torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(curve["kl_bits"], curve_blocks["kl_bits"], rtol=1e-5)
    assert any(p.abs().max() > 0 for p in whole.parameters())


def test_accumulating_micro_batches_gives_the_lens_of_one_step_on_all_their_tokens():
    model = tiny_lm("llama", n_layers=3)
    a, b = random_ids(shape=(2, 12), seed=7), random_ids(shape=(2, 12), seed=8)
    options = dict(steps=3, optimizer="sgd", lr=0.5)
    whole, curve = train_tuned_lens(model, [torch.cat([a, b])], **options)
    split, curve_split = train_tuned_lens(model, [a, b], accumulate=2, **options)
    for x, y in zip(whole.parameters(), split.parameters()):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(curve_split["kl_bits"], curve["kl_bits"], rtol=1e-5, atol=1e-7)
    assert len(curve_split) == 3 * 4 and any(p.abs().max() > 1e-3 for p in split.parameters())
    # not the same as one micro-batch per step
    single, _ = train_tuned_lens(model, [a, b], **options)
    assert not all(torch.allclose(x, y) for x, y in zip(whole.parameters(), single.parameters()))

    # micro-batches of unequal size weigh by tokens; batches are cycled in order across steps
    c = random_ids(shape=(1, 12), seed=9)
    cycled, curve_cycled = train_tuned_lens(model, [a, b, c], accumulate=2, **options)
    joined, curve_joined = train_tuned_lens(
        model, [torch.cat([a, b]), torch.cat([c, a]), torch.cat([b, c])], **options)
    for x, y in zip(joined.parameters(), cycled.parameters()):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(curve_cycled["kl_bits"], curve_joined["kl_bits"], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, "2", None])
def test_a_bad_accumulation_count_is_refused(bad):
    with pytest.raises(ValueError, match="accumulate must be an integer of at least 1"):
        train_tuned_lens(tiny_lm(), [random_ids()], steps=1, accumulate=bad)


def test_resolve_budget_defaults_per_device():
    import json

    from precompute.lens import LensOptions, resolve_budget

    opts = LensOptions()  # 250 steps, micro-batches of 8 x 128 = 1,024 tokens
    assert opts.tokens_per_step is None and opts.train_tokens is None
    assert json.loads(json.dumps(opts.params())) == opts.params()
    for cuda in (torch.device("cuda"), "cuda", "cuda:1", SimpleNamespace(type="cuda")):
        assert resolve_budget(opts, cuda) == (262_144, 256, 250 * 262_144)
    for cpu in (torch.device("cpu"), "cpu", "mps", None):
        assert resolve_budget(opts, cpu) == (8_192, 8, 250 * 8_192)
    toy = LensOptions(steps=100, seq_len=64)  # the demo's toy models: micro-batches of 512 tokens
    assert resolve_budget(toy, "cpu") == (8_192, 16, 819_200)
    assert resolve_budget(toy, "cpu", seq_len=32) == (8_192, 32, 819_200)  # seq_len capped by the context
    # an explicit budget is rounded up to whole micro-batches; explicit train tokens are kept
    assert resolve_budget(LensOptions(steps=10, seq_len=64, tokens_per_step=1_000), "cuda") == (1_024, 2, 10_240)
    assert resolve_budget(LensOptions(seq_len=64, tokens_per_step=100, train_tokens=5_000), "cpu") == (512, 1, 5_000)
    for bad in (dict(tokens_per_step=0), dict(train_tokens=0), dict(batch_size=0)):
        with pytest.raises(ValueError, match="must be positive"):
            resolve_budget(LensOptions(**bad), "cpu")


def test_convergence_of_constructed_curves():
    steps = np.arange(100)
    flat_tail = np.where(steps < 90, 10 - steps * 5 / 90, 5.0)  # falls to 5 at step 90, then flat
    linear = 10 - 0.05 * steps
    curve = pd.concat([
        pd.DataFrame({"model": "tied", "step": steps, "layer": 0, "kl_bits": flat_tail}),
        pd.DataFrame({"model": "tied", "step": steps, "layer": 1, "kl_bits": linear}),
        pd.DataFrame({"model": "untied", "step": steps, "layer": 0, "kl_bits": linear * 2}),
    ]).sample(frac=1.0, random_state=0)  # row order does not matter
    out = convergence(curve)
    assert list(out.columns) == ["model", "layer", "steps", "kl_first", "kl_last", "change", "change_se"]
    rows = {(r.model, r.layer): r for r in out.itertuples()}
    flat = rows[("tied", 0)]
    assert flat.steps == 100 and flat.change == 0.0 and flat.change_se == 0.0 and flat.kl_last == 5.0
    assert flat.kl_first == pytest.approx(10 - 4.5 * 5 / 90)
    # linear: the last 10 steps (90..99) fall by 0.05 x 9 = 0.45 bits around a mean of 10 - 0.05 x 94.5
    lin = rows[("tied", 1)]
    assert lin.kl_first == pytest.approx(9.775) and lin.kl_last == pytest.approx(5.275)
    assert lin.change == pytest.approx(-0.45 / 5.275) and lin.change_se == pytest.approx(0.0, abs=1e-12)
    assert rows[("untied", 0)].change == pytest.approx(-0.45 / 5.275)  # relative: the scale cancels
    # a quarter tail: steps 75..99 fall by 0.05 x 24 = 1.2 around 10 - 0.05 x 87
    quarter = convergence(curve[curve.model == "tied"].drop(columns="model"), tail=0.25)
    assert list(quarter.columns) == ["layer", "steps", "kl_first", "kl_last", "change", "change_se"]
    assert quarter.set_index("layer").loc[1, "change"] == pytest.approx(-1.2 / 5.65)
    # a jittering tail 1, 3, 1, 3 (steps 36..39 of 40): the line through it rises 0.4 a step,
    # 1.2 over the window, around a mean of 2; residuals -0.4, 1.2, -1.2, 0.4 give a slope
    # standard error of sqrt(3.2 / 2 / 5)
    zigzag = np.r_[np.linspace(9, 2, 36), [1.0, 3.0, 1.0, 3.0]]
    row = convergence(pd.DataFrame({"step": np.arange(40), "layer": 0, "kl_bits": zigzag})).iloc[0]
    assert row.kl_last == 2.0 and row.change == pytest.approx(1.2 / 2)
    assert row.change_se == pytest.approx(math.sqrt(3.2 / 2 / 5) * 3 / 2)


def test_convergence_edge_cases():
    one = convergence(pd.DataFrame({"step": [0, 0], "layer": [2, 2], "kl_bits": [1.0, 3.0]}))
    assert one.iloc[0].steps == 1 and one.iloc[0].kl_last == 2.0 and math.isnan(one.iloc[0].change)
    zero = convergence(pd.DataFrame({"step": [1, 10, 50], "layer": 4, "kl_bits": 0.0}))
    assert zero.iloc[0].change == 0.0  # three steps: the last two form the window
    assert math.isnan(zero.iloc[0].change_se)  # two points: no scatter to measure
    two = convergence(pd.DataFrame({"step": [1, 10, 50], "layer": 0, "kl_bits": [9.0, 4.0, 2.0]})).iloc[0]
    assert two.change == pytest.approx((2.0 - 4.0) / 3.0) and two.kl_first == 6.5 and two.kl_last == 3.0
    empty = convergence(pd.DataFrame({"step": [], "layer": [], "kl_bits": []}))
    assert len(empty) == 0 and "change" in empty.columns
    for bad in (0, 1.5, "x"):
        with pytest.raises(ValueError, match="tail must be a number between 0 and 1"):
            convergence(pd.DataFrame({"step": [0], "layer": [0], "kl_bits": [1.0]}), tail=bad)
    with pytest.raises(ValueError, match="missing kl_bits"):
        convergence(pd.DataFrame({"step": [0], "layer": [0]}))


def test_kl_chart_legend_tells_every_series_apart():
    from explorer.render.lens_charts import PAPER_LENS_LABEL, kl_curves

    assert "authors' indexing" in PAPER_LENS_LABEL
    kl = pd.DataFrame([dict(model=m, lens=lens, layer=i, kl_mean=1.0 + i, kl_std=0.1)
                       for m in ("tied", "untied") for lens in ("tuned", "logit") for i in range(3)])
    paper = pd.DataFrame({"model": ["tied", "untied"], "layer": [0, 0], "kl_mean": [2.0, 1.5]})
    for drawn, names in ((None, ["tuned lens", "logit lens"]),
                         (paper, ["tuned lens", "logit lens", PAPER_LENS_LABEL])):
        layers = kl_curves(kl, drawn).to_dict()["layer"]
        shapes = [layer["encoding"]["shape"]["scale"] for layer in layers if "shape" in layer["encoding"]]
        dashes = [layer["encoding"]["strokeDash"]["scale"] for layer in layers if "strokeDash" in layer["encoding"]]
        assert shapes and all(sc["domain"] == names for sc in shapes + dashes)
        assert len(set(shapes[0]["range"])) == len(names)  # one symbol per series in the merged legend
        colours = {tuple(layer["encoding"]["color"]["scale"]["domain"]) for layer in layers}
        assert colours == {("tied", "untied")}  # colour is the model, never the series
    label = "paper, shifted (authors' indexing, see note)"
    shifted = kl_curves(kl, paper, paper_label=label).to_dict()
    assert shifted["layer"][-1]["encoding"]["shape"]["scale"]["domain"][-1] == label


def test_training_curve_chart_is_a_rolling_mean():
    from explorer.render.lens_charts import lens_training_curve

    curve = pd.concat([pd.DataFrame({"model": m, "step": np.arange(40), "layer": layer,
                                     "kl_bits": np.arange(40.0) + 10 * layer + (m == "tied")})
                       for m in ("tied", "untied") for layer in (0, 1)])
    chart = lens_training_curve(curve)  # default window: a twentieth of the 40 steps
    d = chart.data.set_index(["model", "layer", "step"])["kl_smooth"]
    assert d.loc[("untied", 1, 0)] == 10.0 and d.loc[("untied", 1, 5)] == 14.5  # mean of 14 and 15
    assert d.loc[("tied", 0, 39)] == 39.5
    raw = lens_training_curve(curve, window=1, log_y=True)
    assert (raw.data["kl_smooth"] == raw.data["kl_bits"]).all()
    assert raw.to_dict()["spec"]["encoding"]["y"]["scale"]["type"] == "log"


def test_a_lens_for_another_model_shape_is_refused():
    model = tiny_lm("gpt2")
    with pytest.raises(ValueError, match="the lens has 5 translators"):
        evaluate_lens(model, [random_ids()], TunedLens(5, 32))


def test_both_lenses_share_one_interface():
    model = tiny_lm("llama")
    parts = find_lens_parts(model)
    hs = residual_stream(model, parts, random_ids())
    tuned = TunedLens.for_parts(parts)
    with torch.no_grad():
        tuned.translators[0].bias.fill_(0.5)
    for lens, name in ((LogitLens(), "logit"), (tuned, "tuned")):
        assert lens.name == name and lens.to("cpu") is lens
        lens.check(parts)
        with torch.no_grad():
            out = lens.logits(parts, hs[0], 0)
        assert out.shape == (*hs[0].shape[:-1], 300)
    with torch.no_grad():  # the logit lens is unembed(final_norm(h)); the tuned lens translates h first
        expected = model.lm_head(model.model.norm(hs[0]))
        torch.testing.assert_close(LogitLens().logits(parts, hs[0], 0), expected)
        torch.testing.assert_close(tuned.logits(parts, hs[0], 0), model.lm_head(model.model.norm(hs[0] + 0.5)))
    with pytest.raises(ValueError, match="two lenses of one kind"):
        evaluate_lens(model, [random_ids()], [LogitLens(), LogitLens()])
    with pytest.raises(ValueError, match="no lens"):
        evaluate_lens(model, [random_ids()], [])


def test_the_lens_package_imports_without_torch():
    """The app never imports torch; ``tying.lens`` itself (and LensBudget) must not either."""
    import subprocess
    import sys

    code = ("import sys, tying.lens; from tying.lens import LensBudget; "
            "assert 'torch' not in sys.modules, 'torch imported'; print('ok')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr


def test_the_recorded_budget_reads_old_and_new_records():
    from tying.lens import LIBRARY_STEPS, LensBudget

    flat = {"steps": 100, "tokens_per_step": 2048, "accumulate": 4, "batch_size": 8, "seq_len": 64}
    budget = LensBudget.recorded(flat, "tied")
    assert budget == LensBudget(**flat) == LensBudget.recorded(flat, "untied")  # before issue 18: one for both
    per_role = {"tied": dict(flat, seq_len=32, device="cpu"), "untied": flat}
    assert LensBudget.recorded(per_role, "tied").seq_len == 32 and LensBudget.recorded(per_role, "untied") == budget
    assert LensBudget.recorded(per_role, "tied").device == "cpu" and budget.tokens_seen == 100 * 2048
    assert LensBudget.recorded(None, "tied") is None is LensBudget.recorded(per_role, "other")
    assert LensBudget().steps == LIBRARY_STEPS  # the one default: the tuned-lens library's 250 steps


# --------------------------------------------------------------------------- trajectories and batches


def test_prediction_trajectory(tokenizer):
    model = tiny_lm("olmo", vocab_size=len(tokenizer))
    parts = find_lens_parts(model)
    lens, _ = train_tuned_lens(model, text_batches(tokenizer, TEXT, seq_len=16), steps=3, parts=parts)
    traj = prediction_trajectory(model, tokenizer, TEXT, [lens, LogitLens()], top_k=4, max_tokens=10)
    assert list(traj.columns) == ["position", "token", "layer", "lens", "rank", "prediction", "prob"]
    assert len(traj) == 10 * parts.n_hidden * 2 * 4
    ids = tokenizer(TEXT)["input_ids"][:10]
    with torch.no_grad():
        argmax = model(torch.tensor([ids])).logits[0].argmax(-1).tolist()
    top1 = traj[(traj.layer == parts.n_hidden - 1) & (traj["rank"] == 1)]
    for name in ("tuned", "logit"):
        rows = top1[top1.lens == name].sort_values("position")
        assert rows["prediction"].tolist() == [tokenizer.decode([i]) for i in argmax]
    assert traj.groupby("position")["token"].first().tolist() == [tokenizer.decode([i]) for i in ids]
    probs = traj.sort_values(["position", "layer", "lens", "rank"])["prob"].to_numpy().reshape(-1, 4)
    assert (np.diff(probs, axis=1) <= 0).all() and (probs > 0).all()
    logit_only = prediction_trajectory(model, tokenizer, TEXT, LogitLens(), top_k=1, max_tokens=5)
    assert set(logit_only.lens) == {"logit"} and len(logit_only) == 5 * parts.n_hidden
    with pytest.raises(ValueError, match="no text"):
        prediction_trajectory(model, tokenizer, "   ", [lens, LogitLens()])


def test_text_batches(tokenizer):
    batches = text_batches(tokenizer, [TEXT, "", TEXT], seq_len=16, batch_size=3)
    n_tokens = len(tokenizer(TEXT)["input_ids"])
    total = 2 * n_tokens + 1  # the two texts and one end-of-text token between them
    assert sum(b.numel() for b in batches) == total
    assert all(b.dtype == torch.long for b in batches)
    assert all(b.shape == (3, 16) for b in batches[:-2])
    assert batches[-1].shape == (1, total % 16)
    assert tokenizer.eos_token_id in torch.cat([b.reshape(-1) for b in batches]).tolist()
    capped = text_batches(tokenizer, [TEXT] * 100, seq_len=8, batch_size=2, max_tokens=40)
    assert sum(b.numel() for b in capped) == 40 and all(b.shape == (2, 8) for b in capped[:-1])
    for empty in ([], ["", "  \n"], ""):
        with pytest.raises(ValueError, match="no text to evaluate the lens on"):
            text_batches(tokenizer, empty)
    with pytest.raises(ValueError, match="no text to evaluate the lens on"):
        evaluate_lens(tiny_lm(), [])


def test_a_layer_out_of_range_is_a_user_error(tokenizer):
    model = tiny_lm("gpt_neo", vocab_size=len(tokenizer))
    parts = find_lens_parts(model)
    h = torch.zeros(2, parts.d_model)
    message = "layer {} out of range: the model has 3 hidden states \\(0..2\\)"
    for layer in (-1, 3, 10):
        with pytest.raises(ValueError, match=message.format(layer)):
            LogitLens().logits(parts, h, layer)
        with pytest.raises(ValueError, match=message.format(layer)):
            TunedLens.for_parts(parts)(h, layer)
    with pytest.raises(ValueError, match=message.format(3)):
        evaluate_lens(model, [random_ids(len(tokenizer))], layers=[0, 3])
    with pytest.raises(ValueError, match=message.format(7)):
        prediction_trajectory(model, tokenizer, TEXT, LogitLens(), layers=[7])
    with pytest.raises(ValueError, match="layer must be an integer"):
        LogitLens().logits(parts, h, 1.5)


# --------------------------------------------------------------------------- saving and loading


def test_saved_lens_round_trip_and_fingerprint(tmp_path):
    model = tiny_lm("llama", tied=False)
    parts = find_lens_parts(model)
    fingerprint = unembedding_fingerprint(parts)
    assert len(fingerprint) == 64 and fingerprint == unembedding_fingerprint(find_lens_parts(model))
    lens = TunedLens.for_parts(parts)
    with torch.no_grad():
        for p in lens.parameters():
            p.normal_()
    path = save_lens(lens, tmp_path / "lens" / "llama.safetensors", fingerprint, {"model": "tiny", "steps": 3})
    assert path.read_bytes()[8:9] == b"{"  # a safetensors header, not a pickle
    assert sorted(p.name for p in path.parent.iterdir()) == ["llama.json", "llama.safetensors"]  # no temp files
    assert read_lens_meta(path)["meta"] == {"model": "tiny", "steps": 3}
    loaded = load_lens(path, fingerprint)
    assert isinstance(loaded, TunedLens)
    for (name, a), (_, b) in zip(lens.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name

    # another unembedding, or another final norm: another fingerprint, and the lens is not loaded
    with torch.no_grad():
        model.lm_head.weight[0, 0] += 1.0
    changed = unembedding_fingerprint(parts)
    with torch.no_grad():
        model.lm_head.weight[0, 0] -= 1.0
        model.model.norm.weight[0] += 1.0
    assert len({fingerprint, changed, unembedding_fingerprint(parts)}) == 3
    with pytest.warns(UserWarning, match="another unembedding"):
        assert load_lens(path, changed) is None

    with pytest.raises(ValueError, match="no saved lens"):
        load_lens(tmp_path / "missing.safetensors", fingerprint)
    (tmp_path / "blocker").write_text("a file, not a folder")
    with pytest.raises(ValueError, match="cannot write the lens"):
        save_lens(lens, tmp_path / "blocker" / "lens.safetensors", fingerprint)


def test_a_trajectory_stops_at_the_models_context(tokenizer):
    from transformers import AutoModelForCausalLM

    config = tiny_config("gpt2", vocab_size=len(tokenizer), d=32, n_layers=2, tied=True)
    config.n_positions = 8  # GPT-2's position table: a longer text cannot run at all
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config).eval()
    traj = prediction_trajectory(model, tokenizer, TEXT * 3, top_k=1, max_tokens=32)
    assert sorted(traj["position"].unique()) == list(range(8))
