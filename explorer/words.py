"""The paper's words and numbers as the pages use them: what a page reads besides the cache.

Pages import the app (``explorer``) only; the names they need from the library are here, in
one list: the matrices and their pairs, the paper's reference numbers, the claims and their
verdicts, the summary's sentences and its paper section's type, and the one-line error a page shows.
"""

from tying.cache import claims, reference
from tying.cache.mechanism_claims import scale_line
from tying.cache.reference import OVERLAP_K
from tying.cache.schema import (
    DISPLAY_COMPARISONS,
    MATRIX_NAMES,
    MATRIX_PAIRS,
    display_comparison,
    pair_label,
)
from tying.cache.sentences import (
    ONE_MODEL_NOTE,
    coverage_text,
    match_text,
    overlap_context_text,
    projection_text,
    spectral_scope,
    twins_text,
)
from tying.cache.summary import share_beside_paper
from tying.cache.summary_types import PaperReference, stored_as
from tying.errors import UserError, first_line

__all__ = ["DISPLAY_COMPARISONS", "MATRIX_NAMES", "MATRIX_PAIRS", "ONE_MODEL_NOTE", "OVERLAP_K", "PaperReference", "UserError",
           "claims", "coverage_text", "display_comparison", "first_line", "match_text", "overlap_context_text", "pair_label",
           "projection_text", "reference", "scale_line", "share_beside_paper", "spectral_scope", "stored_as", "twins_text"]
