"""The toy lab's training core: corpus, tokenizer, twins, gradient provenance, training, evolution."""

from __future__ import annotations

import numpy as np
import pytest
import torch
import torch.nn.functional as F

from tying.loading.corpus import check_corpus, python_docs_corpus, read_text_corpus
from tying.toylab.model import build_twins, embedding_matrices, toy_config
from tying.toylab.provenance import GradientProvenance, check_scale
from tying.toylab.tokenizer import encode_corpus, train_bpe
from tying.toylab.train import (
    LOG_COLUMNS,
    batch_offsets,
    embedding_evolution,
    log_spaced_steps,
    save_model,
    train_twins,
)

TINY = dict(vocab_size=300, d_model=32, n_layers=2, n_heads=4, context=16)


@pytest.fixture(scope="module")
def corpus():
    return python_docs_corpus(max_chars=60_000)


@pytest.fixture(scope="module")
def tokenized(corpus, tmp_path_factory):
    tok = train_bpe(corpus, 400, tmp_path_factory.mktemp("bpe"))
    return tok, encode_corpus(tok, corpus)


def _loss(model, ids):
    logits = model(input_ids=ids[:, :-1]).logits
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), ids[:, 1:].reshape(-1))


def _batch(seed=0, vocab=300, shape=(3, 17)):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, shape, generator=g)


# ------------------------------------------------------------------ corpus and tokenizer


def test_python_docs_corpus_is_deterministic_and_bounded(corpus):
    assert 50_000 < len(corpus) <= 60_000
    assert corpus == python_docs_corpus(max_chars=60_000)
    assert "\n\n\n" not in corpus and not corpus.startswith("\n")


def test_read_text_corpus(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("one\n\n\n\ntwo  \nlines\n", encoding="utf-8")
    assert read_text_corpus(path) == "one\n\ntwo\nlines"
    with pytest.raises(ValueError, match="not found"):
        read_text_corpus(tmp_path / "missing.txt")


def test_tiny_corpus_refused():
    for text in ("", "   ", "a few words"):
        with pytest.raises(ValueError, match=r"corpus too small: \d+ characters \(need at least 20000\)"):
            check_corpus(text)
    assert check_corpus("x" * 20_000) == "x" * 20_000


def test_bpe_roundtrip_and_eos(tokenized, tmp_path):
    from transformers import AutoTokenizer

    tok, ids = tokenized
    assert len(tok) == 400 and ids.dtype == np.int32
    assert ids.max() < 400 and ids[-1] == tok.eos_token_id
    save_dir = tmp_path / "tok"
    tok.save_pretrained(save_dir)
    loaded = AutoTokenizer.from_pretrained(save_dir)
    assert loaded.encode("the value", add_special_tokens=False) == tok.encode("the value", add_special_tokens=False)
    text = "First paragraph.\n\nSecond one."
    ids2 = encode_corpus(tok, text)
    assert (ids2 == tok.eos_token_id).sum() == 2
    assert tok.decode(ids2) == "First paragraph.<|endoftext|>Second one.<|endoftext|>"


def test_hub_dataset_without_datasets_package(monkeypatch):
    import sys

    from tying.loading.corpus import load_hf_dataset_text

    monkeypatch.setitem(sys.modules, "datasets", None)  # import fails as if not installed
    with pytest.raises(ValueError, match="needs the 'datasets' package"):
        load_hf_dataset_text("wikitext")


def test_vocab_larger_than_corpus_supports(tmp_path):
    with pytest.raises(ValueError, match=r"vocabulary of 5000 tokens asked, the corpus supports only \d+"):
        train_bpe("a small text with few distinct pairs " * 50, 5000, tmp_path)


# ------------------------------------------------------------------ twins


def test_twins_share_init():
    twins = build_twins(TINY, seed=3, variants=("tied", "untied", "tied_scaled"))
    tied, untied = twins["tied"], twins["untied"]
    w = tied.get_input_embeddings().weight
    i, o = embedding_matrices(untied)
    assert w is tied.get_output_embeddings().weight and i is not o
    assert torch.equal(w, i) and torch.equal(w, o)
    assert toy_config(300, tied=True).tie_word_embeddings and not untied.config.tie_word_embeddings
    body_t = {n: p for n, p in tied.named_parameters() if p is not w}
    body_u = {n: p for n, p in untied.named_parameters() if p is not i and p is not o}
    assert body_t.keys() == body_u.keys() and body_t
    assert all(torch.equal(body_t[n], body_u[n]) for n in body_t)
    ids = _batch()
    assert torch.equal(tied(input_ids=ids).logits, untied(input_ids=ids).logits)
    other = build_twins(TINY, seed=4)["tied"]
    assert not torch.equal(other.get_input_embeddings().weight, w)


# ------------------------------------------------------------------ gradient provenance


@pytest.mark.parametrize("scale", [1.0, 5.0])
def test_gradient_split_adds_up_tied(scale):
    model = build_twins(TINY, seed=0, variants=("tied",))["tied"]
    ids = _batch(vocab=120)  # most rows get no input-side gradient
    with GradientProvenance(model, input_grad_scale=scale) as prov:
        _loss(model, ids).backward()
    w = model.get_input_embeddings().weight
    torch.testing.assert_close(w.grad, scale * prov.g_in + prov.g_out, rtol=1e-5, atol=1e-7)
    assert torch.count_nonzero(prov.g_in[120:]) == 0 and torch.count_nonzero(prov.g_out[120:]) > 0
    norms = prov.norms()
    assert norms.input == pytest.approx(scale * prov.g_in.norm().item(), rel=1e-6)
    assert norms.total == pytest.approx(w.grad.norm().item(), rel=1e-5)
    assert norms.output_share == pytest.approx(norms.output / (norms.input + norms.output))


@pytest.mark.parametrize("scale", [1.0, 5.0])
def test_input_proxy_is_the_embedding_output_gradient_norm(scale):
    """The authors' input-side figure: the norm of d loss / d (embedding output) over all positions.

    Checked against autograd's own gradient of the embedding output; it differs from the exact
    norm of what is scattered into the matrix whenever a token repeats in the batch.
    """
    model = build_twins(TINY, seed=0, variants=("tied",))["tied"]
    ids = torch.zeros((2, 8), dtype=torch.long)
    ids[:, ::2] = 3  # token 3 repeats: its scattered row sums four position gradients
    ids[:, 1::2] = torch.arange(1, 9).reshape(2, 4)
    captured = {}

    def keep(_module, _args, output):
        output.retain_grad()
        captured["out"] = output

    handle = model.get_input_embeddings().register_forward_hook(keep)
    with GradientProvenance(model, input_grad_scale=scale) as prov:
        _loss(model, ids).backward()
    handle.remove()
    norms = prov.norms()
    # what autograd sees at the embedding output is already multiplied by the factor
    assert norms.input_proxy == pytest.approx(captured["out"].grad.norm().item(), rel=1e-5)
    assert norms.input_proxy / scale == pytest.approx(
        torch.linalg.vector_norm(captured["out"].grad / scale).item(), rel=1e-5)
    assert abs(norms.input_proxy - norms.input) > 1e-4 * norms.input  # repeated tokens: not the same number


def test_gradient_split_untied():
    model = build_twins(TINY, seed=0, variants=("untied",))["untied"]
    with GradientProvenance(model) as prov:
        _loss(model, _batch()).backward()
    i, o = embedding_matrices(model)
    torch.testing.assert_close(i.grad, prov.g_in, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(o.grad, prov.g_out, rtol=1e-5, atol=1e-7)
    norms = prov.norms()
    assert norms.input == pytest.approx(i.grad.norm().item(), rel=1e-5)
    assert norms.output == pytest.approx(o.grad.norm().item(), rel=1e-5)


def test_scaling_touches_only_the_input_side():
    """With a factor, g_in and g_out are unchanged and every other parameter's gradient too."""
    grads = {}
    for scale in (1.0, 5.0):
        model = build_twins(TINY, seed=1, variants=("tied",))["tied"]
        with GradientProvenance(model, input_grad_scale=scale) as prov:
            _loss(model, _batch(1)).backward()
        grads[scale] = (prov.g_in.clone(), prov.g_out.clone(), {n: p.grad.clone() for n, p in model.named_parameters()})
    (in1, out1, g1), (in5, out5, g5) = grads[1.0], grads[5.0]
    torch.testing.assert_close(in1, in5)
    torch.testing.assert_close(out1, out5)
    for name in g1:
        if name != "model.embed_tokens.weight":
            torch.testing.assert_close(g1[name], g5[name])
    torch.testing.assert_close(g5["model.embed_tokens.weight"] - g1["model.embed_tokens.weight"], 4 * in1,
                               rtol=1e-4, atol=1e-6)


def test_hooks_removed_and_accumulate():
    model = build_twins(TINY, seed=0, variants=("tied",))["tied"]
    prov = GradientProvenance(model, input_grad_scale=2.0).attach()
    _loss(model, _batch(0)).backward()
    _loss(model, _batch(1)).backward()  # accumulates like .grad
    w = model.get_input_embeddings().weight
    torch.testing.assert_close(w.grad, 2 * prov.g_in + prov.g_out, rtol=1e-5, atol=1e-7)
    prov.detach()
    prov.reset()
    model.zero_grad()
    _loss(model, _batch(0)).backward()
    assert torch.count_nonzero(prov.g_in) == 0 and torch.count_nonzero(prov.g_out) == 0


class _Generic(torch.nn.Module):
    """Not a Hugging Face model: any module with the two accessors works, padding row included."""

    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(20, 6, padding_idx=0)
        self.body = torch.nn.Linear(6, 6)
        self.head = torch.nn.Linear(6, 20, bias=False)
        self.head.weight = self.emb.weight

    def get_input_embeddings(self):
        return self.emb

    def get_output_embeddings(self):
        return self.head

    def forward(self, ids):
        return self.head(torch.tanh(self.body(self.emb(ids))))


def test_gradient_split_generic_module_with_padding():
    torch.manual_seed(0)
    model = _Generic()
    ids = torch.tensor([[0, 3, 3, 7], [5, 0, 1, 3]])
    with GradientProvenance(model, input_grad_scale=3.0) as prov:
        model(ids).logsumexp(-1).sum().backward()
    assert prov.tied and torch.count_nonzero(prov.g_in[0]) == 0
    torch.testing.assert_close(model.emb.weight.grad, 3 * prov.g_in + prov.g_out, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("bad", [0, -1.0, float("nan"), "x"])
def test_bad_scale_refused(bad):
    with pytest.raises(ValueError, match="--input-grad-scale must be > 0"):
        check_scale(bad)
    with pytest.raises(ValueError, match="--input-grad-scale must be > 0"):
        train_twins(np.arange(2000) % 50, steps=2, input_grad_scale=bad)


# ------------------------------------------------------------------ schedule of snapshots


@pytest.mark.parametrize("total,n", [(1, 2), (5, 6), (10, 4), (100, 12), (3000, 20), (7, 3)])
def test_log_spaced_steps(total, n):
    steps = log_spaced_steps(total, n)
    assert len(steps) == n and steps[0] == 0 and steps[-1] == total
    assert steps == sorted(set(steps)) and all(isinstance(s, int) for s in steps)
    if total >= 100:  # log spacing: more snapshots in the first tenth than in the last half
        assert sum(s <= total / 10 for s in steps) > sum(s > total / 2 for s in steps)


def test_bad_training_inputs():
    tokens = np.arange(5000) % 50
    with pytest.raises(ValueError, match="unknown variant"):
        train_twins(tokens, variants=("tied", "shared"), steps=2)
    with pytest.raises(ValueError, match="too few for a context"):
        train_twins(np.arange(60) % 50, steps=2, context=64, variants=("tied",))
    with pytest.raises(ValueError, match="token ids must lie"):
        train_twins(tokens, vocab_size=10, steps=2, variants=("tied",))


def test_log_spaced_steps_too_few():
    with pytest.raises(ValueError, match="too few"):
        log_spaced_steps(4, 10)
    with pytest.raises(ValueError, match="too few"):
        train_twins(np.arange(5000) % 50, steps=3, checkpoint_steps=10, variants=("tied",))


# ------------------------------------------------------------------ training


def test_same_data_order():
    a = batch_offsets(10_000, 20, 4, 16, seed=7)
    assert a.shape == (20, 4) and a.min() >= 0 and a.max() + 16 + 1 <= 10_000
    assert np.array_equal(a, batch_offsets(10_000, 20, 4, 16, seed=7))
    assert not np.array_equal(a, batch_offsets(10_000, 20, 4, 16, seed=8))


TRAIN = dict(d_model=32, n_layers=2, n_heads=4, context=16, batch_size=8, lr=1e-2, checkpoint_steps=5, device="cpu")


THREADS_BEFORE = torch.get_num_threads()


@pytest.fixture(scope="module")
def trained(tokenized):
    tok, ids = tokenized
    return train_twins(ids, variants=("tied", "untied", "tied_scaled"), input_grad_scale=1.0, steps=40,
                       vocab_size=len(tok), num_threads=1, shared_start=True, **TRAIN)


def test_training_lowers_loss_and_logs(trained):
    assert list(trained) == ["tied", "untied", "tied_scaled"]
    assert torch.get_num_threads() == THREADS_BEFORE  # num_threads=1 was restored
    for name, result in trained.items():
        log = result.log
        assert list(log.columns) == list(LOG_COLUMNS) and list(log.step) == list(range(1, 41))
        assert log.loss.iloc[-5:].mean() < log.loss.iloc[:5].mean() - 0.5, name
        assert np.isfinite(result.eval_loss) and result.eval_loss < np.log(400)
        assert sorted(result.checkpoints) == log_spaced_steps(40, 5)
        assert ((log.output_share > 0) & (log.output_share < 1)).all()
        inp, out = result.checkpoints[0]
        assert inp.dtype == np.float32 and inp.shape == (400, 32)
        assert (inp is out) == result.tied


def test_same_init_and_data_give_same_run(trained):
    """tied and tied_scaled with factor 1 see the same init and batches: identical runs."""
    a, b = trained["tied"].log, trained["tied_scaled"].log
    assert np.array_equal(a.loss.to_numpy(), b.loss.to_numpy())
    assert np.array_equal(trained["tied"].checkpoints[40][0], trained["tied_scaled"].checkpoints[40][0])
    # the untied twin starts at the same loss (same function at init), then differs
    assert trained["untied"].log.loss.iloc[0] == pytest.approx(a.loss.iloc[0], rel=1e-6)
    assert not np.array_equal(trained["untied"].log.loss.to_numpy(), a.loss.to_numpy())


def test_scaled_run_differs(tokenized):
    tok, ids = tokenized
    runs = train_twins(ids, variants=("tied", "tied_scaled"), input_grad_scale=10.0, steps=5, vocab_size=len(tok),
                       **dict(TRAIN, checkpoint_steps=2))
    a, b = runs["tied"].log, runs["tied_scaled"].log
    assert a.loss.iloc[0] == b.loss.iloc[0]
    assert b.grad_input_norm.iloc[0] == pytest.approx(10 * a.grad_input_norm.iloc[0], rel=1e-5)
    assert b.grad_output_norm.iloc[0] == pytest.approx(a.grad_output_norm.iloc[0], rel=1e-5)
    assert runs["tied_scaled"].input_grad_scale == 10.0 and runs["tied"].input_grad_scale == 1.0


def test_save_model(trained, tokenized, tmp_path):
    from transformers import AutoModelForCausalLM

    out = save_model(trained["untied"].model, tokenized[0], tmp_path / "m")
    assert (out / "model.safetensors").is_file() and (out / "tokenizer.json").is_file()
    loaded = AutoModelForCausalLM.from_pretrained(out)
    ids = _batch(vocab=400)
    with torch.no_grad():
        torch.testing.assert_close(loaded(input_ids=ids).logits, trained["untied"].model(input_ids=ids).logits)


# ------------------------------------------------------------------ embedding evolution


def test_evolution_of_identical_checkpoints():
    rng = np.random.default_rng(0)
    i, o = rng.normal(size=(50, 8)).astype(np.float32), rng.normal(size=(50, 8)).astype(np.float32)
    ev = embedding_evolution({0: (i, o), 3: (i.copy(), o.copy()), 9: (i, o)})
    assert list(ev.columns) == ["step", "matrix", "cos_init", "cos_prev"]
    assert list(ev.matrix) == ["I", "O"] * 3 and list(ev.step) == [0, 0, 3, 3, 9, 9]
    np.testing.assert_allclose(ev.cos_init, 1.0, rtol=1e-12)
    assert ev.cos_prev.iloc[:2].isna().all()
    np.testing.assert_allclose(ev.cos_prev.iloc[2:], 1.0, rtol=1e-12)
    tied = embedding_evolution({0: (i, i), 1: (-i, -i)})
    assert list(tied.matrix) == ["T", "T"]
    assert tied.cos_init.tolist() == pytest.approx([1.0, -1.0]) and tied.cos_prev.iloc[1] == pytest.approx(-1.0)


def test_evolution_of_training(trained):
    ev = embedding_evolution(trained["untied"].checkpoints)
    first = ev[ev.step == 0]
    np.testing.assert_allclose(first.cos_init, 1.0, rtol=1e-9)
    last = ev[ev.step == 40].set_index("matrix")
    assert (last.cos_init < 1).all()
    tied = embedding_evolution(trained["tied"].checkpoints)
    assert set(tied.matrix) == {"T"}


def test_independent_twins_start_apart_and_a_rerun_of_the_same_seed_is_the_same_run(tokenized):
    """Known answers: a shared-start pair has raw-row cosine 1 at step 0 and reads the same batches;
    independent twins (the default) start near 0 and read other batches; T' trained from T's own
    seed reproduces T exactly (same start, same batches: cosine 1), from its own seed it does not."""
    from tying.toylab.model import SEED_OFFSETS, variant_seeds
    from tying.toylab.train import mean_row_cosine

    tok, ids = tokenized
    quick = dict(TRAIN, checkpoint_steps=[3])
    shared = train_twins(ids, variants=("tied", "untied"), steps=3, vocab_size=len(tok), shared_start=True, **quick)
    assert mean_row_cosine(shared["tied"].checkpoints[0][0], shared["untied"].checkpoints[0][0]) == pytest.approx(1.0)
    assert shared["tied"].log.loss.iloc[0] == pytest.approx(shared["untied"].log.loss.iloc[0], rel=1e-6)
    runs = train_twins(ids, variants=("tied", "untied", "tied_rerun"), steps=3, vocab_size=len(tok), seed=2,
                       **quick)
    assert abs(mean_row_cosine(runs["tied"].checkpoints[0][0], runs["untied"].checkpoints[0][0])) < 0.05
    assert abs(mean_row_cosine(runs["tied"].checkpoints[0][0], runs["tied_rerun"].checkpoints[0][0])) < 0.05
    assert runs["tied"].log.loss.iloc[0] != runs["untied"].log.loss.iloc[0]
    assert runs["tied_rerun"].tied and runs["tied_rerun"].checkpoints[3][0] is runs["tied_rerun"].checkpoints[3][1]
    # each run records the seeds of its start and its batches
    assert runs["tied"].settings["init_seed"] == runs["tied"].settings["batch_seed"] == 2
    assert runs["untied"].settings["init_seed"] == 2 + SEED_OFFSETS["untied"]
    assert runs["untied"].settings["shared_start"] is False and shared["untied"].settings["shared_start"] is True
    assert variant_seeds(2, ("tied", "tied_scaled", "untied"), shared_start=True) == dict.fromkeys(
        ("tied", "tied_scaled", "untied"), 2)
    same = train_twins(ids, variants=("tied", "tied_rerun"), steps=3, vocab_size=len(tok), seed=2,
                       seeds={"tied_rerun": 2}, **quick)
    assert np.array_equal(same["tied"].checkpoints[3][0], same["tied_rerun"].checkpoints[3][0])
    assert np.array_equal(same["tied"].checkpoints[3][0], runs["tied"].checkpoints[3][0])
    assert mean_row_cosine(same["tied"].checkpoints[3][0], same["tied_rerun"].checkpoints[3][0]) == pytest.approx(1.0)


def test_per_seed_headlines_against_the_ceiling_known_answers():
    """compare_tied_to_twin with T' = T: the ceiling aligns at 1, overlaps at 1, CKA 1, spectral 0."""
    from tying.analysis.twins import compare_tied_to_twin

    rng = np.random.default_rng(3)
    T, I, O = (rng.standard_normal((300, 16)).astype(np.float32) for _ in range(3))
    m = compare_tied_to_twin(T, I, O, seed=0, device="cpu", T2=T.copy(), spectral=True)
    assert m["T'->T linear in-sample"] == pytest.approx(1.0, abs=1e-4)
    assert m["T'->T identity (raw rows)"] == pytest.approx(1.0, abs=1e-5)
    assert m["overlap@10 T~T'"] == pytest.approx(1.0) and m["CKA T~T'"] == pytest.approx(1.0, abs=1e-6)
    assert m["spectral T~T'"] == pytest.approx(0.0, abs=1e-6) and m["spectral T~O"] > 0.5
    assert abs(m["CKA T~O"]) < 0.1


def test_per_seed_headlines_score_held_out_rows_only():
    """compare_tied_to_twin's held-out linear cosine: ~0 for unrelated matrices with few rows per column.

    A map fitted on every row (leaking the held-out ones) would score them well above 0.
    """
    from tying.analysis.twins import compare_tied_to_twin

    rng = np.random.default_rng(5)
    T, I, O = (rng.standard_normal((400, 150)).astype(np.float32) for _ in range(3))
    m = compare_tied_to_twin(T, I, O, seed=0, device="cpu")
    assert abs(m["O->T linear held-out"]) < 0.05 and abs(m["I->T linear held-out"]) < 0.05
    same = compare_tied_to_twin(T, I, T.copy(), seed=0, device="cpu")
    assert same["O->T linear held-out"] == pytest.approx(1.0, abs=1e-4)
    assert same["O->T identity (raw rows)"] == pytest.approx(1.0, abs=1e-5)
    assert same["overlap@10 T~O"] == pytest.approx(1.0)


def test_table2_is_procrustes_on_centred_rows_in_sample():
    """Known answer: an untied matrix that is a rotated, shifted copy of T scores cosine 1 under the
    paper's Table-2 map (orthogonal Procrustes on centred rows, fitted and scored on the same rows),
    while the unfitted identity map does not."""
    from precompute.toylab import scaling_cosines
    from tying.analysis.align_protocol import split_tokens
    from tying.cache.reference import TABLE2_METHOD

    rng = np.random.default_rng(0)
    T = rng.normal(size=(400, 16)).astype(np.float32)
    R, _ = np.linalg.qr(rng.normal(size=(16, 16)))
    M = (T @ R + 3.0).astype(np.float32)  # a rotation and a shift: centring removes the shift
    fit, ev = split_tokens(len(T), 0.2, 0)
    cells = scaling_cosines(T, M, fit, ev)
    assert TABLE2_METHOD == "procrustes in-sample"
    assert cells[TABLE2_METHOD] == pytest.approx(1.0, abs=1e-4)
    assert cells["identity"] < 0.5 and cells["identity (raw rows)"] < 0.9
    assert cells["linear held-out"] == pytest.approx(1.0, abs=1e-3)
    # a matrix unrelated to T is not aligned by the rotation
    assert scaling_cosines(T, rng.normal(size=T.shape).astype(np.float32), fit, ev)[TABLE2_METHOD] < 0.5
