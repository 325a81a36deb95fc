"""Shared fixtures: tiny random models and tokenizers, built once per test session."""

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
