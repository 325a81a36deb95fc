"""The tokens two vocabularies share, so that a tied and an untied model can be compared row by row.

Models with different tokenizers (GPT-Neo's GPT-2 vocabulary of 50,257 and Pythia's NeoX
vocabulary of 50,304) are compared on the token strings both contain (about 36.9k for that
pair). Matching is on raw token strings (``convert_ids_to_tokens``), not decoded text, so
"Ġthe" matches "Ġthe" and never "the".

``match="ids"`` pairs rows by token id instead (row i of both models, for the ids both
vocabularies have): what the paper's authors did for GPT-Neo vs Pythia in Table 1, where
their k-NN and text use the common strings. Across different tokenizers an id names
different strings on the two sides; :attr:`CommonVocab.same_string` says how often not.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from tying.errors import UserError


@dataclass
class CommonVocab:
    """Tokens both vocabularies contain, and where each sits in either one.

    Row i of the restricted matrices is ``tied_matrix[tied_ids[i]]`` and
    ``untied_matrix[untied_ids[i]]``; both stand for the token string ``tokens[i]``.
    """

    tokens: list[str]  # raw token strings, ordered by tied id
    texts: list[str]  # display strings, taken from the tied side
    tied_ids: np.ndarray  # int64, shape (n,)
    untied_ids: np.ndarray  # int64, shape (n,)
    n_tied: int  # size of the tied vocabulary
    n_untied: int  # size of the untied vocabulary
    coverage_tied: float  # n / n_tied
    coverage_untied: float  # n / n_untied
    identical: bool  # the same token list: ids map to themselves
    match: str = "strings"  # 'strings' (common token strings) or 'ids' (row i with row i)
    same_string: float = 1.0  # share of paired rows whose two token strings are equal

    def __len__(self) -> int:
        return len(self.tokens)


def common_vocabulary(
    tokens_tied: Sequence[str],
    tokens_untied: Sequence[str],
    texts_tied: Sequence[str] | None = None,
    *,
    min_tokens: int = 100,
    match: str = "strings",
) -> CommonVocab:
    """Intersect two vocabularies by token string (or pair them by id with ``match="ids"``).

    Args:
        tokens_tied: raw token string of each id of the tied model's tokenizer.
        tokens_untied: the same for the untied model.
        texts_tied: display strings of the tied ids (defaults to ``tokens_tied``).
        min_tokens: fewer shared tokens than this is an error.
        match: "strings" (default) or "ids": row i of both models for i below the smaller
            vocabulary size; tokens and texts are then the tied side's.

    Returns:
        CommonVocab ordered by tied id. Identical lists map every id to itself. Otherwise
        empty strings never match and a string that occurs twice in one vocabulary is
        matched at its first id only.

    Raises:
        UserError: when fewer than ``min_tokens`` tokens are shared, or the texts do not
            line up with the tokens.
    """
    tokens_tied = list(tokens_tied)
    tokens_untied = list(tokens_untied)
    texts = list(texts_tied) if texts_tied is not None else tokens_tied
    if len(texts) != len(tokens_tied):
        raise UserError(f"{len(texts)} display strings for {len(tokens_tied)} tied tokens")
    n_tied, n_untied = len(tokens_tied), len(tokens_untied)

    if match not in ("strings", "ids"):
        raise UserError(f"match must be 'strings' or 'ids', got '{match}'")
    identical = tokens_tied == tokens_untied
    if match == "ids" and not identical:
        tied_ids = np.arange(min(n_tied, n_untied), dtype=np.int64)
        untied_ids = tied_ids.copy()
    elif identical:
        tied_ids = np.arange(n_tied, dtype=np.int64)
        untied_ids = tied_ids.copy()
    else:
        where_untied: dict[str, int] = {}
        for j, token in enumerate(tokens_untied):
            if token and token not in where_untied:
                where_untied[token] = j
        seen: set[str] = set()
        pairs = []
        for i, token in enumerate(tokens_tied):
            if token in where_untied and token not in seen:
                seen.add(token)
                pairs.append((i, where_untied[token]))
        ids = np.array(pairs, dtype=np.int64).reshape(-1, 2)
        tied_ids, untied_ids = ids[:, 0].copy(), ids[:, 1].copy()

    n = len(tied_ids)
    if n < min_tokens:
        raise UserError(
            f"the two vocabularies share only {n} tokens (minimum {min_tokens}): "
            f"{n_tied} tied and {n_untied} untied tokens; pick models whose tokenizers overlap"
        )
    same = sum(tokens_tied[i] == tokens_untied[j] for i, j in zip(tied_ids.tolist(), untied_ids.tolist()))
    return CommonVocab(
        tokens=[tokens_tied[i] for i in tied_ids],
        texts=[texts[i] for i in tied_ids],
        tied_ids=tied_ids,
        untied_ids=untied_ids,
        n_tied=n_tied,
        n_untied=n_untied,
        coverage_tied=n / n_tied if n_tied else 0.0,
        coverage_untied=n / n_untied if n_untied else 0.0,
        identical=identical,
        match=match,
        same_string=same / n if n else 0.0,
    )
