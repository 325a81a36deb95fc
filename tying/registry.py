"""One entry per analysis: the cache's contract, the first of the four registries joined by name.

An :class:`Analysis` is what the cache promises about one analysis: its name (the stage's name
in the cache's ``stages`` table), its tables (name -> column definitions), a line on each table
and on the analysis, whether ``--skip`` may leave it out, and what it **needs** to be computed:
the matrices T, I, O; an untied twin; a model that runs (its layers, not only its matrices); the
toy lab's training. The layers above hold their own part of each analysis, under the same name:
the writer its stage (the parameters the stage hashes, its builder), the render layer its
figures, the app the page that shows it. They import this module; it names none of them
(``tests/test_layers.py`` checks both: every analysis has a stage, figures and a page, and no
string of the library names a module above it). What the other lists derive from ``needs``: the
stages a run on one tied model runs (:data:`SINGLE_STAGES`), the stages a file of matrices
alone can run (:data:`MATRIX_STAGES`: a GGUF of matrices; the synthetic fixture computes them
with their real builders), ``--skip``'s choices (:data:`OPTIONAL_STAGES`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

NEEDS: dict[str, str] = {
    "matrices": "the matrices T, I and O (T alone on one tied model)",
    "twin": "an untied twin: I and O beside T",
    "model": "a model that runs: its layers, not only its matrices",
    "training": "the toy lab's training runs",
}
"""What an analysis may need, and what each word means."""


@dataclass(frozen=True)
class Analysis:
    """One analysis as the cache holds it."""

    name: str  # the stage's name in the cache's stages table
    tables: dict[str, str]  # table -> CREATE TABLE body
    description: str  # what it computes, one line
    needs: frozenset[str] = frozenset({"matrices"})  # words of NEEDS
    optional: bool = True  # `precompute pair --skip` may leave it out
    about: dict[str, str] = field(default_factory=dict)  # table -> what it holds, one line (docs/cache.md)

    def __post_init__(self) -> None:
        unknown = set(self.needs) - set(NEEDS)
        if unknown:
            raise ValueError(f"analysis {self.name}: unknown needs {sorted(unknown)} (known: {', '.join(NEEDS)})")

    @property
    def single_model(self) -> bool:
        """Runs on one tied model: it needs no untied twin."""
        return "twin" not in self.needs

    @property
    def from_matrices(self) -> bool:
        """Computed from the matrices alone (no model run, no training)."""
        return self.needs <= {"matrices", "twin"}

    @property
    def pair_stage(self) -> bool:
        """A stage of ``precompute pair`` (the toy lab's training is written by ``precompute demo``)."""
        return "training" not in self.needs


_DDL: dict[str, str] = {
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
}


_ABOUT: dict[str, str] = {  # table -> what it holds, one line (docs/cache.md is generated from it)
    "models": 'provenance of the tied and the untied model',
    "tokens": 'the common vocabulary',
    "norms": 'per-token L2 norm of T, I, O',
    "alignment": 'per-token cosine after alignment; method `identity_raw` (raw rows), `identity`, `orthogonal`, `linear`',
    "alignment_summary": 'Table 1',
    "neighbours": 'top-K neighbours within each matrix',
    "overlap_curve": 'mean overlap@k, k = 1..K (Table 5 at k = 10)',
    "spectral": 'spectral distances of the weighted k-NN graphs; `sampled` when n_tokens < n_common',
    "umap": 'aligned 2-D coordinates of every common token; `placed` false (or NULL, schema 2) = fitted by AlignedUMAP, true = placed from its 10 nearest fitted tokens',
    "lens_kl": 'tuned- and logit-lens KL (bits) per hidden state',
    "lens_curve": 'tuned-lens training curves',
    "lens_trajectory": 'top-k predictions per layer for sample texts',
    "runs": 'training runs (toy lab), an imported log, or a checkpoint series; `early_steps` = N of the early output share; `input_norm` = `exact`, `effective` or `plain`',
    "train_log": "gradient provenance per logged step (Figure 4); `grad_input_proxy_norm`: the authors' input-side proxy (toy lab)",
    "evolution": 'embedding evolution (Figure 3)',
    "scaling": "input-gradient scaling vs the untied twin's I and O (Table 2)",
    "seed_metrics": 'headline numbers per seed (mean and spread across seeds)',
}


def _ddl(*tables: str) -> dict[str, str]:
    return {t: _DDL[t] for t in tables}


def _about(*tables: str) -> dict[str, str]:
    return {t: _ABOUT[t] for t in tables}


_ON_MATRICES, _ON_TWIN, _RUNS_MODEL, _TRAINED = (frozenset(n) for n in (("matrices",), ("matrices", "twin"), ("matrices", "model"),
                                                        ("training",)))

ANALYSES: tuple[Analysis, ...] = (
    Analysis("load", _ddl("models", "tokens", "norms"), "the models' provenance, the common vocabulary and its "
             "corpus counts, each matrix's row norms", _ON_MATRICES, optional=False, about=_about("models", "tokens", "norms")),
    Analysis("alignment", _ddl("alignment", "alignment_summary"), "per-token cosine of O->T, I->T and I->O after "
             "identity, orthogonal and linear maps, in-sample and held-out (Table 1, Figure 1)", _ON_TWIN,
             about=_about("alignment", "alignment_summary")),
    Analysis("neighbours", _ddl("neighbours", "overlap_curve"), "each token's nearest neighbours in T, I and O, and "
             "their overlap@k (Table 5)", _ON_MATRICES, about=_about("neighbours", "overlap_curve")),
    Analysis("spectral", _ddl("spectral"), "spectral distance of the matrices' weighted k-NN graphs (Appendix B)", _ON_TWIN,
             about=_about("spectral")),
    Analysis("cka", {"cka": """
                pair VARCHAR,
                n_tokens INTEGER,
                cka DOUBLE,
                cka_biased DOUBLE
            """}, "linear CKA of each matrix pair over every common token", _ON_TWIN,
             about={"cka": "linear CKA of each matrix pair over every common token: debiased (`cka`, Kornblith "
                           "et al. 2019 with the unbiased HSIC) and plain (`cka_biased`)"}),
    Analysis("token_traits", {"token_traits": """
                token INTEGER,
                count BIGINT,
                log_count DOUBLE,
                position DOUBLE,
                under_trained BOOLEAN
            """}, "per token: how often it was seen (log10 count), T's position between I and O (cosine to O minus "
             "to I, linear map, in-sample) and whether it looks under-trained", _ON_MATRICES,
             about={"token_traits": "per token: `count` in the training or lens text (NULL: no text), `log_count` "
                                    "(log10; NULL when never seen), `position` of T between I and O (cosine to O "
                                    "minus to I after the linear in-sample map; NULL without a twin), "
                                    "`under_trained` (rule in the stage's parameters)"}),
    Analysis("umap", _ddl("umap"), "aligned 2-D maps of T, I and O", _ON_MATRICES, about=_about("umap")),
    Analysis("lens", _ddl("lens_kl", "lens_curve", "lens_trajectory"), "tuned- and logit-lens KL per hidden state, "
             "the tuned lens's training curves, prediction trajectories of sample texts", _RUNS_MODEL,
             about=_about("lens_kl", "lens_curve", "lens_trajectory")),
    Analysis("self_prediction", {"self_prediction": """
                model VARCHAR,
                lens VARCHAR,
                matrix VARCHAR,
                layer INTEGER,
                share DOUBLE,
                n_positions INTEGER
            """}, "per model, lens and readout matrix, the share of positions whose top-1 at each hidden state is the "
             "input token itself", _RUNS_MODEL,
             about={"self_prediction": "share of positions whose top-1 is the input token itself, per model, lens "
                                       "(`logit`, `tuned`), readout `matrix` (T; an untied model's O and, logit lens, "
                                       "I) and hidden state"}),
    Analysis("training", _ddl("runs", "train_log", "evolution", "scaling", "seed_metrics"), "the toy lab's training: "
             "gradient provenance, embedding evolution, input-gradient scaling, per-seed headline numbers", _TRAINED,
             optional=False, about=_about("runs", "train_log", "evolution", "scaling", "seed_metrics")),
)
"""Every analysis, in the order ``precompute pair`` runs its stages (``training``, the toy lab's, is
written by ``precompute demo`` and the importers)."""

BY_NAME = {a.name: a for a in ANALYSES}

STAGE_TABLES: dict[str, tuple[str, ...]] = {a.name: tuple(a.tables) for a in ANALYSES}
"""The stages and the tables each one writes."""

PAIR_STAGES: tuple[str, ...] = tuple(a.name for a in ANALYSES if a.pair_stage)
"""The stages ``precompute pair`` runs, in order."""

OPTIONAL_STAGES: tuple[str, ...] = tuple(a for a in PAIR_STAGES if BY_NAME[a].optional)
"""The stages ``precompute pair --skip`` may leave out."""

SINGLE_STAGES: tuple[str, ...] = tuple(a for a in PAIR_STAGES if BY_NAME[a].single_model)
"""The stages a run on one tied model (``precompute pair --tied X`` without ``--untied``) runs:
those that need no untied twin."""

MATRIX_STAGES: tuple[str, ...] = tuple(a for a in PAIR_STAGES if BY_NAME[a].from_matrices)
"""The stages computed from the matrices alone: what a file that holds only the matrices (a
GGUF of matrices) can run, and what the synthetic fixture computes with the stages' builders."""
