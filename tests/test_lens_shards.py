"""A tuned lens too large for one shippable file (issue 52): float16 parts of at most 10 MB each,
read back as saved (the float16 rounding aside), and the loader's pick of the lens of the
recorded budget among the cache's files."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from precompute.trajectory import fitting_lens
from tying import layout
from tying.lens import LensBudget
from tying.lens.files import load_lens, read_lens_meta, save_lens, unembedding_fingerprint
from tying.lens.lenses import TunedLens
from tying.lens.shards import HEADER_MARGIN, MAX_FILE_BYTES, parts_dir


def _trained(n_hidden: int, d_model: int, seed: int = 0) -> TunedLens:
    """A lens with random translators (the last left at the identity, as training leaves it), some
    values far from zero so that float16's relative rounding shows."""
    g = torch.Generator().manual_seed(seed)
    lens = TunedLens(n_hidden, d_model)
    with torch.no_grad():
        for t in lens.translators[:-1]:
            t.weight.copy_(0.2 * torch.rand(d_model, d_model, generator=g) - 0.1)
            t.bias.copy_(20.0 * torch.rand(d_model, generator=g) - 10.0)
    return lens


def _files(path) -> list:
    return [path, *sorted(parts_dir(path).glob("*"))]


def _as_float16(lens: TunedLens) -> dict[str, torch.Tensor]:
    return {k: v.to(torch.float16).to(torch.float32) for k, v in lens.state_dict().items()}


def test_a_smollm2_sized_lens_ships_in_float16_files_of_at_most_10_mb(tmp_path):
    lens = _trained(31, 576)  # SmolLM2-135M: 31 hidden states of width 576, 41 MB in float32
    budget = LensBudget(steps=40, tokens_per_step=512, accumulate=1, batch_size=4, seq_len=128, train_tokens=20480)
    path = save_lens(lens, tmp_path / "tied-abc.safetensors", "fp", {"budget": budget.to_dict()})
    files = _files(path)
    sizes = [f.stat().st_size for f in files]
    assert len(files) >= 3 and max(sizes) <= MAX_FILE_BYTES
    assert sum(sizes) < 0.55 * sum(v.numel() * 4 for v in lens.state_dict().values())  # float16: half
    meta = read_lens_meta(path)
    assert meta["dtype"] == "float16"
    assert [(f["name"], f["bytes"]) for f in meta["files"]] == [(f.relative_to(tmp_path).as_posix(), s)
                                                                for f, s in zip(files, sizes, strict=True)]
    # labelled with its budget, in the file itself and its sidecar
    from safetensors import safe_open

    with safe_open(str(path), framework="pt") as f:
        assert json.loads(f.metadata()["budget"]) == budget.to_dict()
    assert meta["meta"]["budget"] == budget.to_dict()
    back = load_lens(path, "fp")
    expected = _as_float16(lens)
    for name, value in back.state_dict().items():
        assert value.dtype == torch.float32
        assert torch.equal(value, expected[name]), name  # exactly the saved float16 values
        torch.testing.assert_close(value, lens.state_dict()[name], rtol=1e-3, atol=1e-4)
    # the cache's layout lists one file per lens: its parts are not lenses of their own
    assert list(tmp_path.glob("tied-*.safetensors")) == [path]


def test_a_tensor_larger_than_a_file_is_cut_into_row_blocks_and_joined_again(tmp_path):
    lens = _trained(3, 256)  # 128 KB a translator in float16, files with room for 50 KB
    path = save_lens(lens, tmp_path / "l.safetensors", "fp", max_bytes=HEADER_MARGIN + 50_000)
    assert len(_files(path)) >= 6 and max(f.stat().st_size for f in _files(path)) <= HEADER_MARGIN + 50_000
    back = load_lens(path, "fp")
    expected = _as_float16(lens)
    assert all(torch.equal(v, expected[k]) for k, v in back.state_dict().items())


def test_a_lens_that_fits_one_file_stays_float32_and_a_smaller_save_leaves_no_parts(tmp_path):
    path = tmp_path / "l.safetensors"
    save_lens(_trained(31, 576), path, "fp")
    assert parts_dir(path).is_dir()
    small = _trained(3, 16, seed=1)
    save_lens(small, path, "fp")
    assert not parts_dir(path).exists() and "files" not in read_lens_meta(path)
    back = load_lens(path, "fp")
    assert all(torch.equal(v, small.state_dict()[k]) for k, v in back.state_dict().items())


def test_a_part_that_is_missing_or_not_the_saved_one_is_refused(tmp_path):
    path = save_lens(_trained(4, 64), tmp_path / "l.safetensors", "fp", max_bytes=HEADER_MARGIN + 20_000)
    part = sorted(parts_dir(path).glob("*.safetensors"))[-1]
    data = bytearray(part.read_bytes())
    data[-1] ^= 0xFF
    part.write_bytes(bytes(data))
    with pytest.raises(ValueError, match="sha256 differs"):
        load_lens(path, "fp")
    part.unlink()
    with pytest.raises(ValueError, match="misses its part"):
        load_lens(path, "fp")


def test_the_loader_picks_the_lens_trained_with_the_recorded_budget(tmp_path):
    cache = tmp_path / "m.duckdb"
    unembed = nn.Linear(8, 50, bias=False)
    parts = SimpleNamespace(unembed=unembed, final_norm=None, n_hidden=4, d_model=8)
    fp = unembedding_fingerprint(parts)
    folder = layout.lens_dir_of(cache)
    budgets = [LensBudget(steps=40, tokens_per_step=512, train_tokens=20480),
               LensBudget(steps=10, tokens_per_step=256, train_tokens=2560)]
    saved = {}
    for i, b in enumerate(budgets):  # the second saved last: the newest
        saved[b] = save_lens(_trained(4, 8, seed=i), folder / f"tied-{i}.safetensors", fp,
                             {"budget": b.to_dict()}, max_bytes=HEADER_MARGIN + 200)
        assert parts_dir(saved[b]).is_dir()
    for b in budgets:
        assert layout.lens_files(cache, "tied", b)[0] == saved[b]
        lens, f = fitting_lens(cache, "tied", parts, {"budget": {"tied": b.to_dict()}})
        assert f == saved[b]
        expected = _as_float16(_trained(4, 8, seed=budgets.index(b)))
        assert all(torch.equal(v, expected[k]) for k, v in lens.state_dict().items())
