"""The cache schema, defined once: `precompute` writes it, the app reads it.

One DuckDB file per model pair, ``cache/<name>.duckdb``. Matrices are named as in the
paper: ``T`` (tied matrix), ``I`` (untied input matrix), ``O`` (untied output matrix).
Token rows are indexed by ``token``: the position in the pair's common vocabulary
(identical to the token id when both models share one tokenizer).

Bump :data:`SCHEMA_VERSION` whenever a table changes shape. A change that only adds columns
gets a :data:`MIGRATIONS` entry: caches of the versions before still open (:data:`READABLE_VERSIONS`;
readers treat the missing column as its documented default) and a writer brings one up to date
when it writes its next stage. The app refuses caches of any other version and names the
command that rebuilds them.
"""

from __future__ import annotations

from tying import registry
from tying.analysis.align_protocol import CEILING

CACHE_DIR_ENV = "TYING_CACHE_DIR"
"""The environment variable naming the folder of the caches (the app's and every command's default)."""

SCHEMA_VERSION = 5

MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 3 (issue 19): the umap table holds every common token, fitted or placed; a version-2
    # cache's rows were all fitted (the column reads NULL there, and NULL means fitted)
    3: ("ALTER TABLE umap ADD COLUMN IF NOT EXISTS placed BOOLEAN",),
    # 4 (issue 29): the sweep's third protocol; the lr_probe table is created with the others
    4: tuple(f"ALTER TABLE sweep ADD COLUMN IF NOT EXISTS {col} {kind}" for col, kind in (
        ("d_ff", "INTEGER"), ("d_ff_matched", "INTEGER"), ("linear_o_t_in", "DOUBLE"), ("linear_i_t_in", "DOUBLE"),
        ("cos_start_input_untied", "DOUBLE"), ("bigram_train_tokens", "BIGINT"))),
    # 5 (issue 48): the sweep's fourth protocol and the mechanism lab's second
    5: tuple(f"ALTER TABLE {table} ADD COLUMN IF NOT EXISTS {col} {kind}" for table, col, kind in (
        ("sweep", "identity_raw_o_t", "DOUBLE"), ("sweep", "flops_tied", "BIGINT"), ("sweep", "flops_untied", "BIGINT"),
        ("sweep", "flops_tied_matched", "BIGINT"), ("mechanism", "identity_raw_o_t", "DOUBLE"),
        ("mechanism", "unigram_loss", "DOUBLE"), ("mechanism", "update_norm_gap", "DOUBLE"))),
}
"""Version reached -> the SQL that brings a cache of the version before to it (added columns only)."""

READABLE_VERSIONS = tuple(range(min(MIGRATIONS, default=SCHEMA_VERSION + 1) - 1, SCHEMA_VERSION + 1))
"""Schema versions this code opens: :data:`SCHEMA_VERSION` and those :data:`MIGRATIONS` lead up from."""

MATRICES = ("T", "I", "O")
MATRIX_NAMES = {"T": "tied", "I": "untied input", "O": "untied output", "T'": "second tied run"}
MATRIX_PAIRS = (("T", "I"), ("T", "O"), ("I", "O"))

CEILING_PAIRS = (("T", CEILING),)
"""The pairs of the ceiling, CEILING (T'): a second tied model trained like T from another start
(``precompute pair --ceiling``, the toy lab's T'), how alike two runs of T are, the ceiling that
O->T and I->T are read against. Only the alignment (T'->T), overlap (T~T'), spectral (T~T') and
CKA (T~T') tables carry it."""


def pairs_among(matrices) -> tuple[tuple[str, str], ...]:
    """The pairs of :data:`MATRIX_PAIRS` both of whose matrices are among ``matrices`` (all three
    pairs for a tied/untied pair, none for one tied model's T)."""
    have = set(matrices)
    return tuple((a, b) for a, b in MATRIX_PAIRS if a in have and b in have)


def pair_label(a: str, b: str) -> str:
    """``("T", "O") -> "T~O"``: the label of a matrix pair in overlap and spectral tables."""
    return f"{a}~{b}"


# table name -> CREATE TABLE body: the cache's own tables and the sweep's here, every
# analysis's stage tables from its registry entry (tying/registry.py), added below.
TABLES: dict[str, str] = {
    # key/value facts about the cache: schema_version, name, created, provenance (JSON text)
    "meta": """
        key VARCHAR PRIMARY KEY,
        value VARCHAR
    """,
    # one row per finished stage; a rerun skips a stage whose params_hash matches
    "stages": """
        stage VARCHAR PRIMARY KEY,
        params_hash VARCHAR,
        params VARCHAR,
        seconds DOUBLE,
        finished_at TIMESTAMP
    """,
    # the width sweep (`precompute sweep`): one row per cell (d_model, vocab_size, seed) of
    # tied and untied twins trained alike; linear_*: held-out linear map onto T (mean
    # cosine); overlap_*: overlap@10; output_share_early: the tied twin's early output share
    # (mean of per-step ratios) with the exact input norm; _proxy: with the authors' input proxy,
    # the paper's quantity; eval_loss_*:
    # the same held-out text; params_* and embedding_share_*: parameters and the share of
    # them in embedding rows (V*d tied, 2*V*d untied). Each cell is its own stage
    # ("sweep:d<d>:v<V>:s<seed>"), written atomically: a killed sweep resumes. From the second
    # protocol (issue 20; a cache written before lacks these columns, and readers say so):
    # *_tied_matched: a tied model with the untied twin's parameter count (within 2%; deeper in protocol 2);
    # unigram_loss, bigram_loss: smoothed baselines on the same evaluation windows (bigram_beta:
    # the bigram's interpolation strength); tokens_seen and epochs per arm; lr_*: each arm's
    # learning rate, chosen on a validation split. From the third protocol (issue 29): d_ff and
    # d_ff_matched (the matched arm keeps the twins' depth and width and widens its feed-forward
    # layers; n_layers_matched equals n_layers), linear_*_in (the linear map fitted and scored on
    # every token: the paper's protocol), cos_start_input_untied (mean cosine of the untied input
    # rows to their initialisation), bigram_train_tokens (the tokens the baselines were fitted on).
    # From the fourth (issue 48): identity_raw_o_t (mean cosine of row i of T with row i of O, no
    # map: near 1 where the twins share their start, near 0 for independent twins) and each arm's
    # training FLOPs per token (tying.analysis.sweep.train_flops_per_token).
    "sweep": """
        d_model INTEGER,
        vocab_size INTEGER,
        seed INTEGER,
        n_layers INTEGER,
        steps INTEGER,
        linear_o_t DOUBLE,
        linear_i_t DOUBLE,
        overlap_t_o DOUBLE,
        overlap_t_i DOUBLE,
        output_share_early DOUBLE,
        output_share_early_proxy DOUBLE,
        eval_loss_tied DOUBLE,
        eval_loss_untied DOUBLE,
        params_tied BIGINT,
        params_untied BIGINT,
        embedding_share_tied DOUBLE,
        embedding_share_untied DOUBLE,
        seconds DOUBLE,
        params_tied_matched BIGINT,
        n_layers_matched INTEGER,
        eval_loss_tied_matched DOUBLE,
        unigram_loss DOUBLE,
        bigram_loss DOUBLE,
        bigram_beta DOUBLE,
        tokens_seen BIGINT,
        epochs DOUBLE,
        lr_tied DOUBLE,
        lr_untied DOUBLE,
        lr_tied_matched DOUBLE,
        d_ff INTEGER,
        d_ff_matched INTEGER,
        linear_o_t_in DOUBLE,
        linear_i_t_in DOUBLE,
        cos_start_input_untied DOUBLE,
        bigram_train_tokens BIGINT,
        identity_raw_o_t DOUBLE,
        flops_tied BIGINT,
        flops_untied BIGINT,
        flops_tied_matched BIGINT
    """,
    # the sweep's learning-rate probes (third protocol, issue 29): one row per probe run of an
    # arm (tied | untied | tied_matched) at a rate of --lr-grid, trained on the training tokens
    # less the validation split and scored on it (loss: nats per token); the chosen rate of an
    # arm is the probe minimum. Stage "sweep:lr:d<d>:v<V>" per width and vocabulary.
    "lr_probe": """
        d_model INTEGER,
        vocab_size INTEGER,
        arm VARCHAR,
        lr DOUBLE,
        seed INTEGER,
        steps INTEGER,
        loss DOUBLE
    """,
    # the mechanism lab (`precompute mechanism`, issue 33): one row per run, an arm of
    # tying.analysis.mechanism.ARMS or the untied twin ('untied'), per seed, measured against the
    # untied twin of its seed; stage "mechanism:<arm>:s<seed>", written atomically with the run's
    # curve rows: a killed run resumes without retraining finished arms. The SGD arm is measured
    # against the untied twin trained by SGD ('untied_sgd'). From issue 48: identity_raw_o_t (raw-row
    # cosine of T with its twin's O), unigram_loss (the add-one unigram on the evaluation windows:
    # what the run must beat), update_norm_gap (the update-balanced arm: the largest relative
    # difference between its input-side and output-side update norms over the steps; 0: equal)
    "mechanism": """
        arm VARCHAR,
        seed INTEGER,
        optimizer VARCHAR,
        lr DOUBLE,
        steps INTEGER,
        linear_o_t_in DOUBLE,
        linear_i_t_in DOUBLE,
        bias DOUBLE,
        linear_o_t DOUBLE,
        linear_i_t DOUBLE,
        overlap_t_o DOUBLE,
        overlap_t_i DOUBLE,
        bias_overlap DOUBLE,
        output_share_early DOUBLE,
        output_share_early_proxy DOUBLE,
        output_share_applied_early DOUBLE,
        cos_start_tied DOUBLE,
        cos_start_input_untied DOUBLE,
        eval_loss DOUBLE,
        seconds DOUBLE,
        identity_raw_o_t DOUBLE,
        unigram_loss DOUBLE,
        update_norm_gap DOUBLE
    """,
    # the bias over training: T at each snapshot against the untied twin's I and O at that step
    "mechanism_curve": """
        arm VARCHAR,
        seed INTEGER,
        step INTEGER,
        linear_o_t_in DOUBLE,
        linear_i_t_in DOUBLE,
        bias DOUBLE
    """,
    # the SGD arm's learning-rate probes: seed 0 trained on the training tokens less the
    # validation split and scored on it (nats per token); stage "mechanism:lr"
    "mechanism_probe": """
        lr DOUBLE,
        steps INTEGER,
        loss DOUBLE
    """,
}

# The stages (one per analysis of the registry) and the tables each writes; the stages
# `precompute pair` runs, in order.
STAGE_TABLES = registry.STAGE_TABLES
PAIR_STAGES = registry.PAIR_STAGES
TABLES.update({t: body for a in registry.ANALYSES for t, body in a.tables.items()})

# Kinds of cache (meta key 'kind'): a model pair ('pair'), the toy lab ('toylab': a pair plus
# training dynamics), a series of checkpoints ('evolution'), an imported gradient-provenance log
# ('provenance'), the paper's published real-model measurements ('published', `precompute
# paper`), a width sweep of twins ('sweep', `precompute sweep`, whose cells are stages of
# their own, see the sweep table), or the mechanism lab ('mechanism', `precompute mechanism`,
# one stage per arm and seed).

# What the summary's Table 1 and Table 5 read (and what the app's overview shows).
TABLE1_COMPARISONS = ("I->O", "O->T", "I->T", "T'->T")
DISPLAY_COMPARISONS = ("O->T", "I->T", "I->O", "T'->T")
"""The order the app shows comparisons in: the paper's contrast (O->T vs I->T) first."""


def display_comparison(comparison: str) -> str:
    """``"O->T" -> "O→T"``: a comparison as the app writes it."""
    return comparison.replace("->", "→")


TABLE1_METHODS = ("identity_raw", "identity", "orthogonal", "linear")
"""Table 1's map columns: the paper's identity column is on raw rows; ours also on centred rows."""
METHOD_LABELS = {"identity_raw": "identity (raw rows)", "identity": "identity (centred)",
                 "orthogonal": "orthogonal", "linear": "linear"}
"""How the app names each map of TABLE1_METHODS."""
