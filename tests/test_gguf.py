"""GGUF files as model sources (tying.loading.gguf_file): tiny files written here with the gguf
writer, read back within the quantisation's bound, through `precompute pair` end to end."""

import json
from pathlib import Path

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from precompute.cli import main  # noqa: E402
from tests.stage_lists import MATRICES_ONLY  # noqa: E402
from tying import registry  # noqa: E402
from tying.errors import UserError  # noqa: E402
from tying.loading.gguf_file import display_texts  # noqa: E402
from tying.loading.weights import load_model_matrices  # noqa: E402

V, D = 320, 64
TOKENS = [f"Ġtok{i}" if i % 2 else f"tok{i}" for i in range(V)]


def write_gguf(path, embedding, output=None, qtype=gguf.GGMLQuantizationType.Q8_0):
    """A Llama-layout GGUF holding a token embedding (stored as ``qtype``) and, for an untied
    model, an F32 output matrix."""
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_block_count(2)
    w.add_embedding_length(D)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(TOKENS)
    if qtype == gguf.GGMLQuantizationType.F32:
        w.add_tensor("token_embd.weight", embedding)
    else:
        w.add_tensor("token_embd.weight", gguf.quants.quantize(embedding, qtype), raw_dtype=qtype)
    w.add_tensor("blk.0.attn_norm.weight", np.ones(D, np.float32))
    if output is not None:
        w.add_tensor("output.weight", output)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("gguf")
    rng = np.random.default_rng(0)
    T = rng.standard_normal((V, D)).astype(np.float32)
    O = (T + 0.05 * rng.standard_normal((V, D))).astype(np.float32)
    I = rng.standard_normal((V, D)).astype(np.float32)
    tied = write_gguf(root / "tied.gguf", T)
    untied_dir = root / "untied"
    untied_dir.mkdir()
    write_gguf(untied_dir / "model.gguf", I, output=O, qtype=gguf.GGMLQuantizationType.F32)
    return {"root": root, "tied": tied, "untied": untied_dir, "T": T, "I": I, "O": O}


def test_a_tied_q8_0_file_reads_within_the_quantisation_bound(files):
    m = load_model_matrices(str(files["tied"]), role="tied")
    assert m.tied and m.output is m.input and m.input.dtype == np.float32 and m.input.shape == (V, D)
    T = files["T"]
    blocks = np.abs(T).reshape(V, D // 32, 32).max(axis=2, keepdims=True)  # Q8_0: a scale per 32 values
    err = np.abs(m.input - T).reshape(V, D // 32, 32)
    assert (err <= blocks / 127 + 1e-6).all()  # at most one quantisation step per block
    assert m.dtype == "Q8_0" and m.files[0]["gguf_types"] == {"token_embd.weight": "Q8_0"}
    assert m.files[0]["size"] == files["tied"].stat().st_size and len(m.files[0]["sha256"]) == 64
    assert m.tokens == TOKENS and m.token_texts[1] == " tok1" and m.token_texts[0] == "tok0"
    assert m.n_params == V * D + D and m.n_embedding_params == V * D


def test_an_untied_f32_file_in_a_folder_reads_exactly(files):
    m = load_model_matrices(str(files["untied"]), role="untied")
    assert not m.tied and m.output_key == "output.weight"
    np.testing.assert_array_equal(m.input, files["I"])
    np.testing.assert_array_equal(m.output, files["O"])
    with pytest.raises(UserError, match="is untied"):
        load_model_matrices(str(files["untied"]), role="tied")
    with pytest.raises(UserError, match="is tied"):
        load_model_matrices(str(files["tied"]), role="untied")


def test_stored_as_names_a_dequantised_matrix():
    from tying.cache.summary_types import stored_as

    assert stored_as("Q8_0") == "Q8_0, dequantised" and stored_as("IQ4_XS") == "IQ4_XS, dequantised"
    assert stored_as("F16") == "F16" and stored_as("bfloat16") == "bfloat16" and stored_as(None) == ""


def test_display_texts_of_both_vocabularies():
    assert display_texts(["Ġking", "Ċ", "abc"], "gpt2") == [" king", "\n", "abc"]
    assert display_texts(["\u2581king", "<0x0A>", "abc"], "llama") == [" king", "\n", "abc"]


@pytest.mark.parametrize("content", [b"", b"GGUF\x03\x00\x00\x00", b"not a gguf file at all" * 10])
def test_a_truncated_or_foreign_file_is_one_line_and_exit_2_nothing_written(files, tmp_path, capsys, content):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(content)
    with pytest.raises(UserError, match="not a readable GGUF file"):
        load_model_matrices(str(bad))
    code = main(["pair", "--tied", str(bad), "--untied", str(files["untied"]), "--cache-dir", str(tmp_path),
                 "--name", "bad", "--skip", MATRICES_ONLY])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad.duckdb").exists()


def test_pair_on_two_gguf_files_end_to_end(files, tmp_path, capsys):
    """O = T + noise, I unrelated: T~O near 1 and T~I near 0 in CKA; the summary says how T was stored."""
    args = ["pair", "--tied", str(files["tied"]), "--untied", str(files["untied"]), "--cache-dir", str(tmp_path),
            "--name", "g", "--spectral-components", "8", "--neighbours-k", "10", "--skip", "umap"]
    assert main(args) == 0, capsys.readouterr().err
    err = capsys.readouterr().err
    # files of matrices alone: the stages that run a model (the registry's needs) are left out, saying so
    assert "stage lens: skipped: it runs the model" in err
    assert main(["summary", str(tmp_path / "g.duckdb"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert set(s["stages"]) == set(registry.MATRIX_STAGES) - {"umap"}
    assert s["cka"]["T~O"]["cka"] > 0.95 and abs(s["cka"]["T~I"]["cka"]) < 0.1
    assert s["models"]["tied"]["dtype"] == "Q8_0" and s["models"]["untied"]["dtype"] == "F32"
    assert main(["summary", str(tmp_path / "g.duckdb")]) == 0
    assert "stored as Q8_0, dequantised" in capsys.readouterr().out  # the text the Overview shows too


def _byte_table() -> dict[int, str]:
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("\xa1"), ord("\xac") + 1), *range(ord("\xae"), 256)]
    extra = iter(range(256, 512))
    return {b: chr(b) if b in keep else chr(next(extra)) for b in range(256)}


def write_tiny_llama(path, *, tied: bool, seed: int, d: int = 32, layers: int = 2, heads: int = 4, ff: int = 64):
    """A whole Llama-layout GGUF (blocks, norms, a byte-level BPE with merges) that transformers
    loads and runs: random F32 weights."""
    rng = np.random.default_rng(seed)
    merges = [("\u0120", "t"), ("h", "e"), ("\u0120t", "he"), ("i", "n"), ("\u0120", "a")]
    tokens = [*_byte_table().values(), *(a + b for a, b in merges), "<|endoftext|>"]
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_context_length(128)
    w.add_embedding_length(d)
    w.add_block_count(layers)
    w.add_feed_forward_length(ff)
    w.add_head_count(heads)
    w.add_head_count_kv(heads)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(d // heads)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_types([1] * (len(tokens) - 1) + [3])
    w.add_token_merges([f"{a} {b}" for a, b in merges])
    w.add_bos_token_id(len(tokens) - 1)
    w.add_eos_token_id(len(tokens) - 1)

    def random(name, *shape, scale=0.1):
        w.add_tensor(name, (scale * rng.standard_normal(shape)).astype(np.float32))

    random("token_embd.weight", len(tokens), d, scale=1.0)
    for i in range(layers):
        w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(d, np.float32))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(d, np.float32))
        for name, shape in (("attn_q", (d, d)), ("attn_k", (d, d)), ("attn_v", (d, d)), ("attn_output", (d, d)),
                            ("ffn_gate", (ff, d)), ("ffn_up", (ff, d)), ("ffn_down", (d, ff))):
            random(f"blk.{i}.{name}.weight", *shape)
    w.add_tensor("output_norm.weight", np.ones(d, np.float32))
    if not tied:
        random("output.weight", len(tokens), d, scale=1.0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.mark.slow
def test_the_lens_stage_runs_the_gguf_models_through_transformers(tmp_path, capsys):
    """Whole tiny GGUF models: the matrices read from the file are the ones transformers runs, and
    the lens stage trains and scores a tuned lens on every hidden state of both."""
    pytest.importorskip("accelerate")
    from tying.loading.causal_lm import load_causal_lm

    tied = write_tiny_llama(tmp_path / "tied.gguf", tied=True, seed=1)
    (tmp_path / "u").mkdir()
    write_tiny_llama(tmp_path / "u" / "untied.gguf", tied=False, seed=2)
    model, tok = load_causal_lm(str(tied), "cpu")
    m = load_model_matrices(str(tied))
    np.testing.assert_array_equal(m.input, model.get_input_embeddings().weight.detach().numpy())
    assert len(tok) == m.n_vocab and model.config.num_hidden_layers == 2
    text = tmp_path / "text.txt"
    text.write_text("\n\n".join(f"the thin tea in the hat number {i} " * 20 for i in range(60)))
    code = main(["pair", "--tied", str(tied), "--untied", str(tmp_path / "u"), "--cache-dir", str(tmp_path),
                 "--name", "lens", "--skip", "umap,spectral,neighbours", "--lens-text", str(text),
                 "--lens-steps", "3", "--lens-seq-len", "16", "--lens-batch-size", "4", "--lens-tokens-per-step", "64",
                 "--lens-train-tokens", "512", "--lens-eval-tokens", "256"])
    assert code == 0, capsys.readouterr().err
    from tying.cache.store import open_cache, query_df

    kl = query_df(open_cache(tmp_path / "lens.duckdb"), "SELECT model, lens, layer FROM lens_kl")
    for model_name in ("tied", "untied"):
        for lens in ("tuned", "logit"):
            layers = sorted(kl[(kl["model"] == model_name) & (kl["lens"] == lens)]["layer"])
            assert layers[0] == 0 and len(layers) >= 2, (model_name, lens, layers)
    # own text: the app's trajectory command finds the GGUF models the cache was built from and runs them
    capsys.readouterr()
    assert main(["trajectory", str(tmp_path / "lens.duckdb"), "--text", "the thin tea"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {role: Path(m["model"]).suffix for role, m in out["models"].items()} == {"tied": ".gguf",
                                                                                   "untied": ".gguf"}
    assert {(r["model"], r["lens"]) for r in out["rows"]} == {(m, lens) for m in ("tied", "untied")
                                                              for lens in ("tuned", "logit")}


@pytest.mark.slow
def test_a_gguf_model_is_parsed_once_and_loads_as_transformers_alone_loads_it(tmp_path, monkeypatch):
    """transformers parses a GGUF file for the config, the weights and the tokenizer; the load
    parses it once (SmolLM2: about half of the app's worker start), to the same model."""
    pytest.importorskip("accelerate")
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tying.loading import causal_lm

    path = write_tiny_llama(tmp_path / "m.gguf", tied=True, seed=3)
    real, parsed, said = gguf.GGUFReader, [], []
    monkeypatch.setattr(gguf, "GGUFReader", lambda *a, **k: parsed.append(a) or real(*a, **k))
    counting = gguf.GGUFReader
    model, tok = causal_lm.load_causal_lm(str(path), "cpu", progress=lambda i, what: said.append((i, what)))
    assert len(parsed) == 1 and gguf.GGUFReader is counting  # once, and put back after
    assert said == list(enumerate(causal_lm.LOAD_STEPS))  # what it loads, in order, for the app's progress bar
    parsed.clear()
    where = {"pretrained_model_name_or_path": str(path.parent), "gguf_file": path.name}
    alone = AutoModelForCausalLM.from_pretrained(**where, dtype=torch.float32)
    tok_alone = AutoTokenizer.from_pretrained(**where)
    assert len(parsed) >= 3
    ours, theirs = model.state_dict(), alone.state_dict()
    assert ours.keys() == theirs.keys() and all(torch.equal(ours[k], theirs[k]) for k in ours)
    assert tok("the thin hat")["input_ids"] == tok_alone("the thin hat")["input_ids"]


def test_an_architecture_transformers_cannot_run_is_named_in_one_line(tmp_path):
    """Its matrices still read (the reader needs no architecture); running it says which one."""
    pytest.importorskip("accelerate")
    from tying.loading.causal_lm import load_causal_lm

    rng = np.random.default_rng(3)
    w = gguf.GGUFWriter(str(tmp_path / "odd.gguf"), arch="notamodel")
    w.add_embedding_length(D)
    w.add_tokenizer_model("gpt2")
    w.add_token_list(TOKENS)
    w.add_tensor("token_embd.weight", rng.standard_normal((V, D)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    assert load_model_matrices(str(tmp_path / "odd.gguf")).model_type == "notamodel"
    with pytest.raises(UserError, match="notamodel") as err:
        load_causal_lm(str(tmp_path / "odd.gguf"), "cpu")
    assert "\n" not in str(err.value)


FAMILIES = {  # a family's GGUF layout: its tokenizer model, a word as its vocabulary spells it, extra block tensors
    "llama": ("gpt2", "\u0120the", ()),
    "qwen2": ("gpt2", "\u0120the", ("attn_q.bias", "attn_k.bias", "attn_v.bias")),
    "gemma3": ("llama", "\u2581the", ("attn_q_norm.weight", "attn_k_norm.weight", "post_attention_norm.weight",
                                     "post_ffw_norm.weight")),
}


def write_tied_family(path, arch: str, *, blocks: int = 2, whole: bool = True):
    """A tied GGUF of ``arch``'s layout as llama.cpp writes it (token_embd, no output.weight; every
    block's attention and feed-forward weights, the family's own extra tensors; its tokenizer model),
    with ``whole=False`` its last block without ffn_down. Returns the embedding written."""
    model, word, extra = FAMILIES[arch]
    rng = np.random.default_rng(len(arch))
    tokens = [word, *(f"{word[0]}tok{i}" for i in range(V - 2)), "<eos>"]
    emb = rng.standard_normal((V, D)).astype(np.float32)
    w = gguf.GGUFWriter(str(path), arch=arch)
    w.add_block_count(blocks)
    w.add_embedding_length(D)
    w.add_tokenizer_model(model)
    w.add_token_list(tokens)
    w.add_tensor("token_embd.weight", emb)
    for i in range(blocks):
        names = ["attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight", "ffn_gate.weight",
                 "ffn_up.weight", *(["ffn_down.weight"] if whole or i < blocks - 1 else []), *extra]
        for name in names:
            shape = (D,) if name.endswith((".bias", "norm.weight")) else (D, D)
            w.add_tensor(f"blk.{i}.{name}", rng.standard_normal(shape).astype(np.float32))
    w.add_tensor("output_norm.weight", np.ones(D, np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return emb


@pytest.mark.parametrize("arch", sorted(FAMILIES))
def test_a_tied_file_of_each_family_reads_its_one_matrix_its_words_and_whether_it_runs(tmp_path, arch):
    """Gemma 3, Qwen2 and Llama GGUFs as llama.cpp lays them out: the embedding read exactly, as the
    input and the output matrix (tied: no output.weight), the family named, its vocabulary's word
    marker shown as a space (SentencePiece's "▁", byte-level BPE's "Ġ"), and the model runnable only
    when every block has its attention and feed-forward weights."""
    emb = write_tied_family(tmp_path / f"{arch}.gguf", arch)
    m = load_model_matrices(str(tmp_path / f"{arch}.gguf"))
    assert m.model_type == arch and m.tied and m.runs and m.n_vocab == V and m.d_model == D
    np.testing.assert_array_equal(m.input, emb)
    assert m.output is m.input and m.output_key is None
    assert m.token_texts[0] == " the"
    write_tied_family(tmp_path / "cut.gguf", arch, whole=False)
    assert not load_model_matrices(str(tmp_path / "cut.gguf")).runs


def test_a_gemma3_file_builds_a_cache_of_one_tied_model(tmp_path, capsys):
    """`precompute pair --tied FILE.gguf` on a Gemma 3 layout (what a user runs on their own GGUF):
    a cache of one model whose summary names the family, the stages that need an untied twin left out."""
    from tests.stage_lists import MATRICES_ONLY

    write_tied_family(tmp_path / "gemma.gguf", "gemma3")
    args = ["pair", "--tied", str(tmp_path / "gemma.gguf"), "--cache-dir", str(tmp_path), "--name", "gem",
            "--skip", MATRICES_ONLY]
    assert main(args) == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "gem.duckdb"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert list(s["models"]) == ["tied"] and "gemma3" in json.dumps(s["models"]["tied"])
    assert "untied" not in s["models"]
