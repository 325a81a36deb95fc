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

SCHEMA_VERSION = 4

MIGRATIONS: dict[int, tuple[str, ...]] = {
    # 3 (issue 19): the umap table holds every common token, fitted or placed; a version-2
    # cache's rows were all fitted (the column reads NULL there, and NULL means fitted)
    3: ("ALTER TABLE umap ADD COLUMN IF NOT EXISTS placed BOOLEAN",),
    # 4 (issue 29): the sweep's third protocol; the lr_probe table is created with the others
    4: tuple(f"ALTER TABLE sweep ADD COLUMN IF NOT EXISTS {col} {kind}" for col, kind in (
        ("d_ff", "INTEGER"), ("d_ff_matched", "INTEGER"), ("linear_o_t_in", "DOUBLE"), ("linear_i_t_in", "DOUBLE"),
        ("cos_start_input_untied", "DOUBLE"), ("bigram_train_tokens", "BIGINT"))),
}
"""Version reached -> the SQL that brings a cache of the version before to it (added columns only)."""

READABLE_VERSIONS = tuple(range(min(MIGRATIONS, default=SCHEMA_VERSION + 1) - 1, SCHEMA_VERSION + 1))
"""Schema versions this code opens: :data:`SCHEMA_VERSION` and those :data:`MIGRATIONS` lead up from."""

MATRICES = ("T", "I", "O")
MATRIX_NAMES = {"T": "tied", "I": "untied input", "O": "untied output"}
MATRIX_PAIRS = (("T", "I"), ("T", "O"), ("I", "O"))


def pair_label(a: str, b: str) -> str:
    """``("T", "O") -> "T~O"``: the label of a matrix pair in overlap and spectral tables."""
    return f"{a}~{b}"


# table name -> CREATE TABLE body. Order matters only for readability.
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
    # the two models of the pair (role: tied | untied)
    "models": """
        role VARCHAR PRIMARY KEY,
        source VARCHAR,
        revision VARCHAR,
        commit_sha VARCHAR,
        model_type VARCHAR,
        tied_in_weights BOOLEAN,
        d_model INTEGER,
        n_vocab INTEGER,
        n_rows_stored INTEGER,
        n_params BIGINT,
        n_embedding_params BIGINT,
        embedding_share DOUBLE,
        dtype VARCHAR,
        input_key VARCHAR,
        output_key VARCHAR,
        fingerprint VARCHAR,
        files VARCHAR,
        load_seconds DOUBLE
    """,
    # the common vocabulary: raw token string, display text, ids in each model, corpus counts
    "tokens": """
        token INTEGER PRIMARY KEY,
        raw VARCHAR,
        text VARCHAR,
        tied_id INTEGER,
        untied_id INTEGER,
        freq_tied BIGINT,
        freq_untied BIGINT
    """,
    # per-token L2 norm of each matrix row
    "norms": """
        matrix VARCHAR,
        token INTEGER,
        norm REAL
    """,
    # per-token cosine after alignment: comparison 'I->O' | 'O->T' | 'I->T',
    # method 'identity_raw' (raw rows, the paper's identity column) | 'identity' (centred rows)
    # | 'orthogonal' | 'linear', split 'in_sample' | 'held_out'
    "alignment": """
        comparison VARCHAR,
        method VARCHAR,
        split VARCHAR,
        token INTEGER,
        cosine REAL
    """,
    "alignment_summary": """
        comparison VARCHAR,
        method VARCHAR,
        split VARCHAR,
        applicable BOOLEAN,
        note VARCHAR,
        n_tokens INTEGER,
        mean DOUBLE,
        std DOUBLE
    """,
    # top-K neighbours by cosine within each matrix, self excluded; rank 1 = nearest
    "neighbours": """
        matrix VARCHAR,
        token INTEGER,
        rank SMALLINT,
        neighbour INTEGER,
        score REAL
    """,
    # mean overlap@k over all tokens for k = 1..K, by matrix pair ('T~I', 'T~O', 'I~O')
    "overlap_curve": """
        pair VARCHAR,
        k INTEGER,
        mean_overlap DOUBLE
    """,
    # spectral distance of the weighted k-NN graphs (Appendix B) on n_tokens of the n_common
    # tokens: all of them (sampled false, the paper) or a seeded sample (sampled true)
    "spectral": """
        pair VARCHAR,
        graph_k INTEGER,
        n_components INTEGER,
        n_tokens INTEGER,
        n_common INTEGER,
        sampled BOOLEAN,
        distance DOUBLE
    """,
    # 2-D UMAP coordinates of each matrix, aligned so a token sits in comparable places: every
    # common token; placed false (or NULL, in a cache written before schema 3) = fitted by
    # AlignedUMAP (a seeded sample of --umap-tokens), true = placed afterwards into the same
    # coordinates from its nearest fitted tokens (tying.analysis.placement.place)
    "umap": """
        matrix VARCHAR,
        token INTEGER,
        x REAL,
        y REAL,
        placed BOOLEAN
    """,
    # --- lens (layerwise KL): model 'tied' | 'untied', lens 'tuned' | 'logit',
    # layer 0 = the embedding output ("input"), 1..L = each block's output
    "lens_kl": """
        model VARCHAR,
        lens VARCHAR,
        layer INTEGER,
        kl_mean DOUBLE,
        kl_std DOUBLE,
        n_tokens INTEGER
    """,
    # tuned-lens training curves: KL (bits) on the training batches per step and layer
    "lens_curve": """
        model VARCHAR,
        step INTEGER,
        layer INTEGER,
        kl_bits DOUBLE
    """,
    # prediction trajectories of a few sample texts: top-k predictions per position and layer
    "lens_trajectory": """
        model VARCHAR,
        sample INTEGER,
        position INTEGER,
        token VARCHAR,
        layer INTEGER,
        lens VARCHAR,
        rank INTEGER,
        prediction VARCHAR,
        prob DOUBLE
    """,
    # --- training dynamics (toy lab, imported provenance logs, checkpoint evolution) -------
    # one row per training run or checkpoint series: variant 'tied' | 'untied' | 'tied_scaled'
    # (toy lab), 'imported' (a provenance CSV), 'checkpoints' (evolution of a real model);
    # early_steps: the logged steps with step <= early_steps make the "early" output share;
    # input_norm: which input-side norm train_log.grad_input_norm holds ('exact' scattered
    # into the matrix, or an imported log's 'effective' (after input scaling) or 'plain' column)
    "runs": """
        run VARCHAR PRIMARY KEY,
        variant VARCHAR,
        seed INTEGER,
        input_grad_scale DOUBLE,
        steps INTEGER,
        final_loss DOUBLE,
        eval_loss DOUBLE,
        seconds DOUBLE,
        source VARCHAR,
        settings VARCHAR,
        early_steps INTEGER,
        input_norm VARCHAR
    """,
    # gradient provenance per logged optimiser step: L2 norms of the gradient reaching the
    # embedding matrix through the input lookup (grad_input_norm: exactly as scattered into
    # the matrix's rows, or what an imported log gives, see runs.input_norm) and through the
    # output projection; grad_input_proxy_norm: the authors' input-side figure, the norm of
    # the gradient w.r.t. the embedding layer's output over all positions (toy lab only);
    # output_share = output / (input + output) of that step
    "train_log": """
        run VARCHAR,
        step INTEGER,
        loss DOUBLE,
        grad_input_norm DOUBLE,
        grad_output_norm DOUBLE,
        grad_total_norm DOUBLE,
        output_share DOUBLE,
        grad_input_proxy_norm DOUBLE
    """,
    # embedding evolution (Figure 3): mean per-token cosine of a matrix to its first
    # checkpoint (cos_init) and to the previous one (cos_prev)
    "evolution": """
        run VARCHAR,
        step BIGINT,
        label VARCHAR,
        matrix VARCHAR,
        cos_init DOUBLE,
        cos_prev DOUBLE
    """,
    # input-gradient scaling (Table 2): mean per-token cosine of a tied run's matrix to the
    # untied twin's input (target 'I') and output (target 'O') matrices
    "scaling": """
        run VARCHAR,
        seed INTEGER,
        input_grad_scale DOUBLE,
        target VARCHAR,
        method VARCHAR,
        mean_cosine DOUBLE
    """,
    # headline numbers per seed, for mean and spread across seeds
    "seed_metrics": """
        seed INTEGER,
        metric VARCHAR,
        value DOUBLE
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
        bigram_train_tokens BIGINT
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
}

# The stages of `precompute pair`, in order, and the tables each one writes.
STAGE_TABLES: dict[str, tuple[str, ...]] = {
    "load": ("models", "tokens", "norms"),
    "alignment": ("alignment", "alignment_summary"),
    "neighbours": ("neighbours", "overlap_curve"),
    "spectral": ("spectral",),
    "umap": ("umap",),
    "lens": ("lens_kl", "lens_curve", "lens_trajectory"),
    "training": ("runs", "train_log", "evolution", "scaling", "seed_metrics"),
}

# The stages `precompute pair` runs, in order.
PAIR_STAGES = ("load", "alignment", "neighbours", "spectral", "umap", "lens")

# Kinds of cache (meta key 'kind'): a model pair ('pair'), the toy lab ('toylab': a pair plus
# training dynamics), a series of checkpoints ('evolution'), an imported gradient-provenance log
# ('provenance'), the paper's published real-model measurements ('published', `precompute
# paper`), or a width sweep of twins ('sweep', `precompute sweep`, whose cells are stages of
# their own, see the sweep table).

# What the summary's Table 1 and Table 5 read (and what the app's overview shows).
TABLE1_COMPARISONS = ("I->O", "O->T", "I->T")
DISPLAY_COMPARISONS = ("O->T", "I->T", "I->O")
"""The order the app shows comparisons in: the paper's contrast (O->T vs I->T) first."""


def display_comparison(comparison: str) -> str:
    """``"O->T" -> "O→T"``: a comparison as the app writes it."""
    return comparison.replace("->", "→")


TABLE1_METHODS = ("identity_raw", "identity", "orthogonal", "linear")
"""Table 1's map columns: the paper's identity column is on raw rows; ours also on centred rows."""
METHOD_LABELS = {"identity_raw": "identity (raw rows)", "identity": "identity (centred)",
                 "orthogonal": "orthogonal", "linear": "linear"}
"""How the app names each map of TABLE1_METHODS."""
