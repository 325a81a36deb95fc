"""GGUF files as model sources (tying.loading.gguf_file): tiny files written here with the gguf
writer, read back within the quantisation's bound, through `precompute pair` end to end."""

import json

import numpy as np
import pytest

gguf = pytest.importorskip("gguf")

from precompute.cli import main  # noqa: E402
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
                 "--name", "bad", "--skip", "lens"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "bad.duckdb").exists()


def test_pair_on_two_gguf_files_end_to_end(files, tmp_path, capsys):
    """O = T + noise, I unrelated: T~O near 1 and T~I near 0 in CKA; the lens needs the model, so
    asking for it on a GGUF says so in one line."""
    args = ["pair", "--tied", str(files["tied"]), "--untied", str(files["untied"]), "--cache-dir", str(tmp_path),
            "--name", "g", "--spectral-components", "8", "--neighbours-k", "10", "--umap-tokens", "200"]
    code = main(args + ["--skip", "umap,lens"])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    assert main(["summary", str(tmp_path / "g.duckdb"), "--json"]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["cka"]["T~O"]["cka"] > 0.95 and abs(s["cka"]["T~I"]["cka"]) < 0.1
    assert s["models"]["tied"]["dtype"] == "Q8_0" and s["models"]["untied"]["dtype"] == "F32"
    assert main(["summary", str(tmp_path / "g.duckdb")]) == 0
    assert "stored as Q8_0, dequantised" in capsys.readouterr().out  # the text the Overview shows too
    assert main(args + ["--name", "g2"]) == 2
    assert "lens stage" in capsys.readouterr().err and not (tmp_path / "g2.duckdb").exists()
