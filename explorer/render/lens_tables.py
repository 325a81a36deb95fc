"""The Lens page's table and note (pure functions): a trajectory's top-k predictions at one
hidden state, and the text the authors' lenses saw against this cache's.
"""

from __future__ import annotations

import pandas as pd

from explorer.render import read
from tying.cache import reference
from tying.cache.summary_types import Summary


def lens_text_note(s: Summary) -> str:
    """The text the authors' lenses saw against this cache's, where the paper's KL is shown or quoted."""
    params = (s.stages.get("lens") or {}).get("params") or {}
    text = f"Text: the authors' tuned lenses were {reference.LENS_TEXT}."
    if params.get("text"):
        budget = params.get("budget") or {}
        train = budget.get("train_tokens") or params.get("train_tokens")
        text += f" This cache's lenses were trained and evaluated on {params['text']}"
        if train:
            text += f" ({train:,} training tokens, {params.get('eval_tokens') or 0:,} evaluation tokens)"
        text += (": another text and budget, so the absolute KL is not comparable with theirs, only its pattern "
                 "across layers and between tied and untied.")
    return text


def budget_notes(s: Summary) -> list[str]:
    """Per model whose tuned lens trained on less than the tuned-lens library's default budget, how
    briefly, and that its KL is an upper bound (:func:`tying.lens.upper_bound_note`)."""
    from tying.lens import LensBudget, upper_bound_note

    params = (s.stages.get("lens") or {}).get("params") or {}
    budget = params.get("budget") or {}
    notes = [upper_bound_note(LensBudget.recorded(budget, role), role) for role in ("tied", "untied") if role in s.models]
    return [n for n in notes if n]


def top_k(t: pd.DataFrame, layer: int) -> pd.DataFrame:
    """A trajectory's top-k predictions at one hidden state: a row per input position, headed by
    its number and (visible) token, e.g. '3: path', and a column per rank ('top 1', 'top 2', ...):
    as many rows as the text has tokens, so the table is as narrow as k, whatever the text."""
    at = t[t["layer"] == layer]
    tokens = at.drop_duplicates("position").set_index("position")["token"]
    wide = at.pivot_table(index="position", columns="rank", values="prediction", aggfunc="first")
    wide.columns = [f"top {r}" for r in wide.columns]
    wide.index = [f"{p}: {tokens.get(p, '')}" for p in wide.index]
    return wide.rename_axis("input token").reset_index()


@read.memo(1024)
def sample_top_k(ref: read.CacheRef, model: str, lens: str, sample: int, layer: int) -> pd.DataFrame:
    """:func:`top_k` of a stored sample text's trajectory, once per cache (read-only)."""
    return top_k(read.trajectory(ref, model, lens, sample), layer)


@read.memo(256)
def sample_text(ref: read.CacheRef, model: str, lens: str, sample: int) -> str:
    """A stored sample text, its tokens joined as shown (:func:`~explorer.render.read.trajectory_text`)."""
    return read.trajectory_text(read.trajectory(ref, model, lens, sample))


@read.memo(16)
def has_logit_lens(ref: read.CacheRef) -> bool:
    """Whether the cache's layerwise KL holds logit-lens rows beside the tuned lens's."""
    return bool((read.table(ref, "lens_kl")["lens"] == "logit").any())


@read.memo(64)
def sample_rows(ref: read.CacheRef, sample: int) -> pd.DataFrame:
    """A stored sample text's trajectory rows for every model and lens (tokens made visible): what
    the commitment strip and the pinned curves read. Read-only."""
    traj = read.table(ref, "lens_trajectory")
    return read.visible_trajectory(traj[traj["sample"] == sample])
