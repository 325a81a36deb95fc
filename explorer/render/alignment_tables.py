"""What the Alignment page reads of one cache besides its per-token rows (once per cache):
the notes of maps that do not apply, and whether the cache knows each token's frequency."""

from __future__ import annotations

from explorer.render import read


@read.memo(64)
def not_applicable(ref: read.CacheRef, method: str, split: str) -> tuple[str, ...]:
    """The notes of the comparisons for which ``method`` on ``split`` does not apply (e.g. an
    identity map between matrices of different widths)."""
    summ = read.alignment_summary(ref)
    na = summ[(summ["method"] == method) & (summ["split"] == split) & (~summ["applicable"])]
    return tuple(na["note"])


@read.memo(16)
def has_frequencies(ref: read.CacheRef) -> bool:
    """Whether the cache holds the tied model's corpus count of its tokens (the toy lab does)."""
    return bool(read.tokens(ref)["freq_tied"].notna().any())
