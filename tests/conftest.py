"""Shared fixtures: tiny random models and tokenizers, built once per test session; the
synthetic, sweep and paper caches the site and browser tests read, built once per module."""

from __future__ import annotations

import pytest

from tests.tiny_models import make_tiny_model, make_tokenizer


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory):
    """A 300-token byte-level BPE shared by the tiny models (so their vocabularies match)."""
    path = tmp_path_factory.mktemp("tokenizer")
    make_tokenizer(path, 300, corpus_seed=0)
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, tokenizer_dir):
    """``tiny_model(family, tied, **options)`` -> folder of a saved tiny model, built once per options.

    The returned folder is shared between tests: copy it before changing files in it.
    """
    built = {}

    def get(family: str, tied: bool, **options):
        key = (family, tied, tuple(sorted((k, repr(v)) for k, v in options.items())))
        if key not in built:
            options.setdefault("tokenizer_dir", tokenizer_dir)
            out = tmp_path_factory.mktemp(f"{family}-{'tied' if tied else 'untied'}")
            built[key] = make_tiny_model(family, out, tied=tied, **options)
        return built[key]

    return get


@pytest.fixture(scope="session")
def mirror_pair(tmp_path_factory, tokenizer_dir, tiny_model):
    """(tied, mirror): a tiny tied Llama, and an untied one whose output matrix is the tied model's
    matrix and whose input matrix is random (O->T aligns at 1, CKA T~O is 1)."""
    tied = tiny_model("llama", True, seed=1)

    def copy_tied_into_output(model):
        from safetensors.torch import load_file

        w = load_file(str(tied / "model.safetensors"))
        model.lm_head.weight.copy_(w[next(k for k in w if k.endswith("embed_tokens.weight"))])

    mirror = make_tiny_model("llama", tmp_path_factory.mktemp("mirror"), tied=False, tokenizer_dir=tokenizer_dir,
                             seed=3, edit=copy_tied_into_output)
    return tied, mirror


SWEEP_GAPS = {32: [0.30, 0.31, 0.29], 64: [0.10, 0.11, 0.09], 128: [-0.10, -0.11, -0.09]}
"""The sweep cache's loss gaps (untied minus tied) per width and seed: shrinking with width,
negative at the widest."""


@pytest.fixture(scope="module")
def synthetic_caches(tmp_path_factory):
    """A folder of four caches: ``synthetic`` (a pair whose vocabulary holds a script tag), a
    ``sweep`` of ``SWEEP_GAPS``, a ``mechanism`` lab and the ``paper``'s published numbers. Built afresh for each
    module that asks, as each module built its own before: one module's use of it (a server
    reading it, sites written from it) does not meet another's."""
    from precompute.published import PaperConfig, build_paper
    from tying.cache.fixtures import build_mechanism_cache, build_sweep_cache, build_synthetic_cache

    caches = tmp_path_factory.mktemp("synthetic-caches")
    build_synthetic_cache(caches, "synthetic")
    build_sweep_cache(caches, SWEEP_GAPS)
    build_mechanism_cache(caches)
    build_paper(PaperConfig(cache_dir=str(caches)))
    return caches
