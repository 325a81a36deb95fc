"""Intersecting two vocabularies by token string."""

from __future__ import annotations

import numpy as np
import pytest

from tests.tiny_models import make_tokenizer
from tying.loading.vocab import common_vocabulary


@pytest.fixture(scope="module")
def two_vocabularies(tmp_path_factory):
    """Token lists of two different BPE tokenizers (sizes 300 and 400, different corpora)."""
    a = make_tokenizer(tmp_path_factory.mktemp("tok-a"), 300, corpus_seed=0)
    b = make_tokenizer(tmp_path_factory.mktemp("tok-b"), 400, corpus_seed=1)
    tokens_a = a.convert_ids_to_tokens(list(range(len(a))))
    tokens_b = b.convert_ids_to_tokens(list(range(len(b))))
    texts_a = [a.decode([i]) for i in range(len(a))]
    return tokens_a, tokens_b, texts_a


def test_different_tokenizers(two_vocabularies):
    tokens_a, tokens_b, texts_a = two_vocabularies
    common = common_vocabulary(tokens_a, tokens_b, texts_a)
    shared = set(tokens_a) & set(tokens_b)
    assert len(shared) < min(len(tokens_a), len(tokens_b))  # the vocabularies really differ
    assert len(common) == len(shared) > 256  # at least the byte alphabet
    assert not common.identical
    assert common.n_tied == 300 and common.n_untied == 400
    assert common.coverage_tied == pytest.approx(len(shared) / 300)
    assert common.coverage_untied == pytest.approx(len(shared) / 400)
    assert common.tied_ids.dtype == common.untied_ids.dtype == np.int64
    assert np.all(np.diff(common.tied_ids) > 0)  # ordered by tied id
    for i, token in enumerate(common.tokens):
        assert token == tokens_a[common.tied_ids[i]] == tokens_b[common.untied_ids[i]]
        assert common.texts[i] == texts_a[common.tied_ids[i]]


def test_identical_vocabularies(two_vocabularies):
    tokens_a, _, _ = two_vocabularies
    common = common_vocabulary(tokens_a, list(tokens_a))
    assert common.identical
    np.testing.assert_array_equal(common.tied_ids, np.arange(len(tokens_a)))
    np.testing.assert_array_equal(common.untied_ids, np.arange(len(tokens_a)))
    assert common.coverage_tied == common.coverage_untied == 1.0
    assert common.texts == tokens_a  # no display strings given: the tokens themselves


def test_too_small_overlap():
    a = [f"a{i}" for i in range(200)] + ["x", "y"]
    b = [f"b{i}" for i in range(200)] + ["y", "x"]
    with pytest.raises(ValueError, match="share only 2 tokens \\(minimum 100\\)"):
        common_vocabulary(a, b)
    common = common_vocabulary(a, b, min_tokens=2)
    assert common.tokens == ["x", "y"]
    assert common.tied_ids.tolist() == [200, 201] and common.untied_ids.tolist() == [201, 200]


def test_duplicates_and_empty_strings():
    a = ["", "p", "q", "p", "r"]
    b = ["q", "", "p", "p"]
    common = common_vocabulary(a, b, min_tokens=1)
    assert common.tokens == ["p", "q"]  # "" never matches; "p" matched at first ids
    assert common.tied_ids.tolist() == [1, 2] and common.untied_ids.tolist() == [2, 0]


def test_no_overlap_at_all():
    with pytest.raises(ValueError, match="share only 0 tokens"):
        common_vocabulary(["a"], ["b"], min_tokens=1)


def test_texts_must_line_up():
    with pytest.raises(ValueError, match="display strings"):
        common_vocabulary(["a", "b"], ["a", "b"], ["a"], min_tokens=1)


def test_match_by_ids_pairs_row_i_with_row_i():
    """Two tokenizers holding the same strings in another order: strings pair them right, ids do not."""
    tied = [f"t{i}" for i in range(200)]
    untied = list(reversed(tied)) + ["extra"]  # the same 200 strings, reversed, and one more
    by_string = common_vocabulary(tied, untied)
    assert by_string.match == "strings" and len(by_string) == 200 and by_string.same_string == 1.0
    np.testing.assert_array_equal(by_string.untied_ids, 199 - np.arange(200))
    by_id = common_vocabulary(tied, untied, match="ids")
    assert by_id.match == "ids" and len(by_id) == 200  # the smaller vocabulary's ids
    np.testing.assert_array_equal(by_id.tied_ids, np.arange(200))
    np.testing.assert_array_equal(by_id.untied_ids, np.arange(200))
    assert by_id.tokens == tied  # shown by the tied side's strings
    assert by_id.same_string == 0.0  # 200 is even: no row keeps its string after reversal
    assert by_id.coverage_tied == 1.0 and by_id.coverage_untied == pytest.approx(200 / 201)


def test_match_by_ids_on_real_tokenizers(two_vocabularies):
    tokens_a, tokens_b, texts_a = two_vocabularies
    by_id = common_vocabulary(tokens_a, tokens_b, texts_a, match="ids")
    assert len(by_id) == 300 and (by_id.untied_ids == np.arange(300)).all()
    same = np.mean([tokens_a[i] == tokens_b[i] for i in range(300)])
    assert by_id.same_string == pytest.approx(same)
    with pytest.raises(ValueError):
        common_vocabulary(tokens_a, tokens_b, match="bytes")
