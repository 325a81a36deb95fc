"""Loading input and output matrices from tiny saved models of every family the paper uses."""

from __future__ import annotations

import hashlib
import json
import shutil
import time

import numpy as np
import pytest
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, AutoTokenizer

from tests.tiny_models import FAMILIES, make_tokenizer
from tying.loading import readers
from tying.loading.headers import read_safetensors_header
from tying.loading.weights import load_model_matrices

EXPECTED_KEYS = {
    "llama": ("model.embed_tokens.weight", "lm_head.weight"),
    "olmo": ("model.embed_tokens.weight", "lm_head.weight"),
    "qwen3": ("model.embed_tokens.weight", "lm_head.weight"),
    "gpt2": ("transformer.wte.weight", "lm_head.weight"),
    "gpt_neo": ("transformer.wte.weight", "lm_head.weight"),
    "gpt_neox": ("gpt_neox.embed_in.weight", "embed_out.weight"),
}


def _full_model(path):
    return AutoModelForCausalLM.from_pretrained(path)


def _embeddings(model):
    inp = model.get_input_embeddings().weight.detach().float().numpy()
    out = model.get_output_embeddings().weight.detach().float().numpy()
    return inp, out


def _copy(src, tmp_path):
    dst = tmp_path / "model"
    shutil.copytree(src, dst)
    return dst


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
@pytest.mark.parametrize("family", FAMILIES)
def test_each_family_loads(tiny_model, family, tied):
    path = tiny_model(family, tied)
    m = load_model_matrices(str(path))
    model = _full_model(path)
    inp, out = _embeddings(model)
    tokenizer = AutoTokenizer.from_pretrained(path)

    assert m.tied is tied
    assert m.model_type == family
    assert m.input_key == EXPECTED_KEYS[family][0]
    assert m.output_key == (None if tied else EXPECTED_KEYS[family][1])
    assert m.n_vocab == len(tokenizer) == m.n_rows_stored
    assert m.input.shape == m.output.shape == (m.n_vocab, 32) and m.d_model == 32
    assert m.input.dtype == m.output.dtype == np.float32 and m.dtype == "float32"
    np.testing.assert_array_equal(m.input, inp)
    np.testing.assert_array_equal(m.output, out)
    assert (m.output is m.input) is tied
    assert (m.fingerprint["input"] == m.fingerprint["output"]) is tied

    n_params = sum(p.numel() for p in model.parameters())  # tied parameters counted once
    n_embedding = inp.size + (0 if tied else out.size)
    assert m.n_params == n_params
    assert m.n_embedding_params == n_embedding
    assert m.embedding_share == pytest.approx(n_embedding / n_params)

    assert m.tokens == tokenizer.convert_ids_to_tokens(list(range(m.n_vocab)))
    assert len(m.token_texts) == m.n_vocab and m.token_texts[0] == "<|endoftext|>"
    assert m.commit is None and m.revision is None and m.local_dir == str(path)
    assert [f["name"] for f in m.files][0] == "config.json"
    assert {"model.safetensors", "tokenizer.json"} <= {f["name"] for f in m.files}
    assert all(f["size"] > 0 for f in m.files)
    # each file read by its name, size and sha256 (published instead of where it lies here)
    assert all(f["sha256"] == hashlib.sha256((path / f["name"]).read_bytes()).hexdigest() for f in m.files)
    assert m.seconds > 0


def test_sharded_checkpoint_reads_only_needed_shards(tiny_model):
    plain = load_model_matrices(str(tiny_model("llama", False)))
    path = tiny_model("llama", False, max_shard_size="20KB")
    index = json.loads((path / "model.safetensors.index.json").read_text())
    shards = sorted(set(index["weight_map"].values()))
    assert len(shards) > 2

    m = load_model_matrices(str(path))
    np.testing.assert_array_equal(m.input, plain.input)
    np.testing.assert_array_equal(m.output, plain.output)
    assert m.n_params == plain.n_params and not m.tied
    wanted = {index["weight_map"][m.input_key], index["weight_map"][m.output_key]}
    names = [f["name"] for f in m.files]
    assert "model.safetensors.index.json" in names
    assert {n for n in names if n.endswith(".safetensors")} == wanted


@pytest.mark.parametrize("tied", [True, False], ids=["tied", "untied"])
def test_bin_fallback(tiny_model, tied):
    path = tiny_model("gpt2", tied, safe_serialization=False)
    assert not list(path.glob("*.safetensors")) and (path / "pytorch_model.bin").exists()
    m = load_model_matrices(str(path))
    model = _full_model(path)
    inp, out = _embeddings(model)
    assert m.tied is tied
    np.testing.assert_array_equal(m.input, inp)
    np.testing.assert_array_equal(m.output, out)
    # the .bin holds the tied copy under lm_head.weight, as old checkpoints do
    assert m.output_key == "lm_head.weight"
    assert m.n_params == sum(p.numel() for p in model.parameters())


def test_padding_rows_dropped(tiny_model):
    path = tiny_model("olmo", False, pad_rows=24)
    m = load_model_matrices(str(path))
    model = _full_model(path)
    inp, out = _embeddings(model)
    assert m.n_rows_stored == m.n_vocab + 24 == inp.shape[0]
    assert m.input.shape == (m.n_vocab, 32)
    np.testing.assert_array_equal(m.input, inp[: m.n_vocab])
    np.testing.assert_array_equal(m.output, out[: m.n_vocab])
    assert m.n_params == sum(p.numel() for p in model.parameters())
    assert m.n_embedding_params == inp.size + out.size  # padding rows count as stored


def test_bfloat16_checkpoint(tiny_model):
    path = tiny_model("qwen3", False, dtype=torch.bfloat16)
    m = load_model_matrices(str(path))
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.bfloat16)
    inp, out = _embeddings(model)
    assert m.dtype == "bfloat16" and m.input.dtype == np.float32
    np.testing.assert_array_equal(m.input, inp)
    np.testing.assert_array_equal(m.output, out)


def test_chunked_reading_matches(tiny_model, monkeypatch):
    path = tiny_model("gpt_neox", False, pad_rows=5)
    whole = load_model_matrices(str(path))
    monkeypatch.setattr(readers, "CHUNK_BYTES", 7 * 32 * 4)  # 7 rows per chunk
    chunked = load_model_matrices(str(path))
    np.testing.assert_array_equal(chunked.input, whole.input)
    np.testing.assert_array_equal(chunked.output, whole.output)
    assert chunked.fingerprint == whole.fingerprint


def test_role_mismatch_both_ways(tiny_model):
    with pytest.raises(ValueError, match="is tied .*pass an untied model"):
        load_model_matrices(str(tiny_model("llama", True)), role="untied")
    with pytest.raises(ValueError, match="is untied .*pass a tied model"):
        load_model_matrices(str(tiny_model("llama", False)), role="tied")
    assert load_model_matrices(str(tiny_model("llama", True)), role="tied").tied
    assert not load_model_matrices(str(tiny_model("llama", False)), role="untied").tied
    with pytest.raises(ValueError, match="role must be"):
        load_model_matrices(str(tiny_model("llama", True)), role="both")


def _copy_input_to_output(model):
    model.get_output_embeddings().weight.copy_(model.get_input_embeddings().weight)


def test_untied_config_with_equal_matrices_is_tied(tiny_model):
    path = tiny_model("olmo", False, edit=_copy_input_to_output)
    m = load_model_matrices(str(path))
    assert m.tied and m.output is m.input and m.output_key == "lm_head.weight"
    model = _full_model(path)
    # the stored copy is not counted twice
    assert m.n_params == sum(p.numel() for p in model.parameters()) - m.input.size
    with pytest.raises(ValueError, match="is tied \\(its output matrix equals its input matrix\\)"):
        load_model_matrices(str(path), role="untied")


def _nan_in_input(model):
    model.get_input_embeddings().weight[5, 3] = float("nan")


def _inf_in_output(model):
    model.get_output_embeddings().weight[7, 0] = float("inf")


def test_nan_or_inf_refused(tiny_model):
    with pytest.raises(ValueError, match="contains NaN or inf values in model.embed_tokens.weight"):
        load_model_matrices(str(tiny_model("llama", False, edit=_nan_in_input)))
    with pytest.raises(ValueError, match="contains NaN or inf values in lm_head.weight"):
        load_model_matrices(str(tiny_model("llama", False, edit=_inf_in_output)))


def test_missing_paths(tmp_path, tiny_model):
    with pytest.raises(ValueError, match="path does not exist"):
        load_model_matrices(str(tmp_path / "nowhere"))
    with pytest.raises(ValueError, match="no config.json"):
        load_model_matrices(str(tmp_path))
    (tmp_path / "file.txt").write_text("x")
    with pytest.raises(ValueError, match="not a model directory"):
        load_model_matrices(str(tmp_path / "file.txt"))
    with pytest.raises(ValueError, match="applies only to Hugging Face ids"):
        load_model_matrices(str(tiny_model("llama", True)), revision="main")


def test_corrupt_safetensors(tiny_model, tmp_path):
    path = _copy(tiny_model("llama", False), tmp_path)
    weights_file = path / "model.safetensors"
    data = weights_file.read_bytes()
    weights_file.write_bytes(data[: len(data) // 2])  # truncated
    with pytest.raises(ValueError, match="corrupt safetensors file"):
        load_model_matrices(str(path))
    weights_file.write_bytes((40).to_bytes(8, "little") + b"{not json" + b"\0" * 64)
    with pytest.raises(ValueError, match="corrupt safetensors file"):
        load_model_matrices(str(path))
    weights_file.write_bytes(b"abc")
    with pytest.raises(ValueError, match="corrupt safetensors file"):
        load_model_matrices(str(path))


def test_corrupt_bin(tiny_model, tmp_path):
    path = _copy(tiny_model("gpt2", True, safe_serialization=False), tmp_path)
    (path / "pytorch_model.bin").write_bytes(b"not a torch file")
    with pytest.raises(ValueError, match="corrupt checkpoint file"):
        load_model_matrices(str(path))


def test_missing_embedding_tensors(tiny_model, tmp_path):
    path = _copy(tiny_model("llama", False), tmp_path)
    state = load_file(path / "model.safetensors")
    del state["lm_head.weight"]
    save_file(state, path / "model.safetensors")
    with pytest.raises(ValueError, match="no output embedding tensor \\('lm_head.weight'\\)"):
        load_model_matrices(str(path))
    del state["model.embed_tokens.weight"]
    save_file(state, path / "model.safetensors")
    with pytest.raises(ValueError, match="no input embedding tensor \\('model.embed_tokens.weight'\\)"):
        load_model_matrices(str(path))
    (path / "model.safetensors").unlink()
    with pytest.raises(ValueError, match="has no weights"):
        load_model_matrices(str(path))


def test_legacy_key_layout(tiny_model, tmp_path):
    """GPT-2 as first published: no "transformer." prefix, attention-mask buffers stored."""
    path = _copy(tiny_model("gpt2", True), tmp_path)
    state = load_file(path / "model.safetensors")
    state = {k.removeprefix("transformer."): v for k, v in state.items()}
    for layer in range(2):
        state[f"h.{layer}.attn.bias"] = torch.ones(1, 1, 128, 128)
    save_file(state, path / "model.safetensors")
    m = load_model_matrices(str(path))
    model = _full_model(tiny_model("gpt2", True))
    assert m.input_key == "wte.weight" and m.tied and m.output_key is None
    np.testing.assert_array_equal(m.input, _embeddings(model)[0])
    assert m.n_params == sum(p.numel() for p in model.parameters())  # buffers left out


def test_no_tokenizer(tiny_model, tmp_path):
    path = _copy(tiny_model("llama", True), tmp_path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (path / name).unlink()
    with pytest.raises(ValueError, match="no usable tokenizer"):
        load_model_matrices(str(path))


def test_tokenizer_larger_than_matrix(tiny_model, tmp_path):
    path = _copy(tiny_model("llama", False), tmp_path)
    make_tokenizer(path, 400)
    with pytest.raises(ValueError, match="the tokenizer has 400 tokens but .* has only 300 rows"):
        load_model_matrices(str(path))


def test_header_parser_matches_safetensors(tiny_model):
    from safetensors import safe_open

    file = tiny_model("qwen3", False) / "model.safetensors"
    header = read_safetensors_header(file)
    with safe_open(str(file), "pt") as f:
        assert set(header) == set(f.keys())
        for key in f.keys():
            assert header[key].shape == tuple(f.get_slice(key).get_shape())


def _offline(monkeypatch, tmp_path):
    import huggingface_hub.constants

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))


def test_hub_id_offline_fails_fast(monkeypatch, tmp_path):
    _offline(monkeypatch, tmp_path)
    start = time.perf_counter()
    with pytest.raises(ValueError, match="cannot fetch 'nobody-here/no-such-model' from the Hugging Face Hub"):
        load_model_matrices("nobody-here/no-such-model", cache_dir=str(tmp_path / "cache"))
    assert time.perf_counter() - start < 10
    with pytest.raises(ValueError, match="not a local path and not a valid Hub id"):
        load_model_matrices("no such model!", cache_dir=str(tmp_path / "cache"))


def test_hub_id_offline_uses_cached_snapshot(monkeypatch, tmp_path, tiny_model):
    """With the Hub out of reach, a model already in the Hugging Face cache still loads."""
    _offline(monkeypatch, tmp_path)
    cache = tmp_path / "cache"
    commit = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / "models--someone--tiny-olmo"
    shutil.copytree(tiny_model("olmo", False), repo / "snapshots" / commit)
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text(commit)
    m = load_model_matrices("someone/tiny-olmo", cache_dir=str(cache))
    assert m.commit == commit and m.source == "someone/tiny-olmo" and not m.tied
    plain = load_model_matrices(str(tiny_model("olmo", False)))
    assert m.fingerprint == plain.fingerprint


class FakeHub:
    """Stands in for HfApi and hf_hub_download, serving one local model folder as a Hub repo."""

    commit = "fedcba9876543210fedcba9876543210fedcba98"

    def __init__(self, folder, cache, error=None):
        self.folder, self.cache, self.error = folder, cache, error
        self.downloaded: list[str] = []
        self.headers_read: list[str] = []

    def __call__(self):  # HfApi() -> this object
        return self

    def model_info(self, repo_id, revision=None, files_metadata=False):
        from types import SimpleNamespace

        if self.error is not None:
            raise self.error
        siblings = []
        for path in sorted(self.folder.iterdir()):
            lfs = SimpleNamespace(sha256="0" * 64) if path.suffix == ".safetensors" else None
            size = path.stat().st_size
            siblings.append(SimpleNamespace(rfilename=path.name, size=size, blob_id="b" * 40, lfs=lfs))
        return SimpleNamespace(sha=self.commit, siblings=siblings)

    def parse_safetensors_file_metadata(self, repo_id, filename, revision=None):
        from types import SimpleNamespace

        assert revision == self.commit
        self.headers_read.append(filename)
        header = read_safetensors_header(self.folder / filename)
        return SimpleNamespace(
            tensors={k: SimpleNamespace(dtype=t.dtype, shape=list(t.shape)) for k, t in header.items()}
        )

    def download(self, repo_id, filename, revision=None, cache_dir=None, local_files_only=False):
        if local_files_only:  # the offline fallback: this fake cache is always empty
            raise FileNotFoundError(filename)
        assert revision == self.commit and cache_dir == str(self.cache)
        self.downloaded.append(filename)
        target = self.cache / "snapshots" / self.commit / filename
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(self.folder / filename, target)
        return str(target)


def _fake_hub(monkeypatch, hub):
    import huggingface_hub

    monkeypatch.setattr(huggingface_hub, "HfApi", hub)
    monkeypatch.setattr(huggingface_hub, "hf_hub_download", hub.download)


def test_hub_downloads_only_the_shards_it_needs(monkeypatch, tmp_path, tiny_model):
    folder = tiny_model("llama", False, max_shard_size="20KB")
    hub = FakeHub(folder, tmp_path / "cache")
    _fake_hub(monkeypatch, hub)
    m = load_model_matrices("someone/tiny-llama", revision="main", cache_dir=str(tmp_path / "cache"))
    local = load_model_matrices(str(folder))

    index = json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"]
    shards = set(index.values())
    needed = {index[local.input_key], index[local.output_key]}
    assert len(shards - needed) >= 1
    assert set(hub.downloaded) == {
        "config.json",
        "tokenizer.json",
        "tokenizer_config.json",
        "model.safetensors.index.json",
    } | needed
    assert set(hub.headers_read) == shards  # parameter count from every header, no download
    assert m.commit == hub.commit and m.revision == "main"
    assert m.fingerprint == local.fingerprint
    assert m.n_params == local.n_params and m.embedding_share == local.embedding_share
    by_name = {f["name"]: f for f in m.files}
    assert set(by_name) == set(hub.downloaded)
    assert all(by_name[n]["sha256"] == "0" * 64 for n in needed)
    assert by_name["config.json"]["blob_id"] == "b" * 40


def test_hub_errors_become_user_errors(monkeypatch, tmp_path, tiny_model):
    import httpx2
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    response = httpx2.Response(404, request=httpx2.Request("GET", "https://huggingface.co/api/models/x/y"))
    cases = [
        (RepositoryNotFoundError("404", response=response), "no such repository"),
        (RevisionNotFoundError("404", response=response), "no revision 'v9'"),
        (ConnectionError("Name or service not known"), "the Hub cannot be reached"),
    ]
    for error, message in cases:
        _fake_hub(monkeypatch, FakeHub(tiny_model("llama", True), tmp_path / "cache", error=error))
        with pytest.raises(ValueError, match=f"cannot fetch 'x/y' from the Hugging Face Hub: {message}"):
            load_model_matrices("x/y", revision="v9", cache_dir=str(tmp_path / "cache"))


def test_never_loads_the_model_nor_trusts_remote_code(monkeypatch, tiny_model):
    import transformers

    seen = []

    def spy(original):
        def call(*args, **kwargs):
            seen.append(kwargs.get("trust_remote_code"))
            return original(*args, **kwargs)

        return call

    def refuse(*args, **kwargs):
        raise AssertionError("the full model must not be loaded")

    path = tiny_model("qwen3", True)  # built before the spies go in
    auto_model, auto_config, auto_tokenizer = (
        transformers.AutoModelForCausalLM,
        transformers.AutoConfig,
        transformers.AutoTokenizer,
    )
    monkeypatch.setattr(auto_model, "from_pretrained", refuse)
    monkeypatch.setattr(auto_model, "from_config", spy(auto_model.from_config))
    monkeypatch.setattr(auto_config, "from_pretrained", spy(auto_config.from_pretrained))
    monkeypatch.setattr(auto_tokenizer, "from_pretrained", spy(auto_tokenizer.from_pretrained))
    m = load_model_matrices(str(path))
    assert m.tied and len(seen) >= 3 and all(v is False for v in seen)  # config, skeleton, tokenizer


def test_a_pickle_that_runs_code_is_refused(tiny_model, tmp_path):
    """The .bin fallback unpickles tensors only (torch.load weights_only=True): an object that
    would run code on loading is refused as a corrupt file, and its code never runs."""
    path = _copy(tiny_model("gpt2", True, safe_serialization=False), tmp_path)
    marker = tmp_path / "code-ran"

    class Payload:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    state = torch.load(path / "pytorch_model.bin", weights_only=True)
    torch.save({**state, "payload": Payload()}, path / "pytorch_model.bin")
    with pytest.raises(ValueError, match="corrupt checkpoint file"):
        load_model_matrices(str(path))
    assert not marker.exists()


def test_safetensors_win_over_a_bin_beside_them(tiny_model, tmp_path):
    path = _copy(tiny_model("llama", False), tmp_path)
    (path / "pytorch_model.bin").write_bytes(b"never opened")
    m = load_model_matrices(str(path))
    assert not m.tied and "pytorch_model.bin" not in {f["name"] for f in m.files}


def test_first_line_of_an_exception():
    from tying.errors import first_line

    assert first_line(ValueError("bad thing\nmore detail")) == "bad thing"
    assert first_line(KeyError("lm_head.weight"), typed=True) == "KeyError: 'lm_head.weight'"
    assert first_line(RuntimeError()) == "RuntimeError" == first_line(RuntimeError(), typed=True)
    assert first_line(OSError("x" * 200), typed=True, limit=160) == "OSError: " + "x" * 157 + "..."
