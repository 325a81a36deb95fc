"""One entry per analysis: the registry every list of analyses is derived from.

An :class:`Analysis` is one stage of ``precompute pair`` (or the toy lab's training): its
cache tables (name -> column definitions), the run parameters it reads (its stage hash), the
function that builds its tables, the summary fields it adds, the figures it contributes and
the page that shows it. The cache schema (:data:`tying.cache.schema.TABLES`,
``STAGE_TABLES``, ``PAIR_STAGES``), the pair command's stages and builders, the summary, the
figure registry and the pack, the app's menu and page list and the tests' page lists all
read from here; adding an analysis is an entry here plus its own modules.

Builders, summaries and figures are named ``"module:attribute"`` and imported only when
used, so this module imports nothing: the library stays below the writer (which builds) and
the render layer (which draws), and a command that reads a cache never loads torch.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Page:
    """A page of the app (a script in ``views/``) and the table whose rows it shows."""

    script: str
    title: str
    icon: str  # a Material Symbols icon (":material/<name>:"): no emoji font needed, as lecture-hall PCs may lack one
    url_path: str
    needs: str | None = None  # a table of the picked cache; None: every cache has the page
    default: bool = False  # served at "/"
    folder: str | None = None  # the kind of cache of the folder it shows ("sweep", "mechanism"), not the picked cache
    about: str = ""  # what it shows, one line (the README's page table)


@dataclass(frozen=True)
class Analysis:
    """One analysis: a stage of the cache, what it writes, reads, adds and shows."""

    name: str  # the stage's name in the cache's stages table
    tables: dict[str, str]  # table -> CREATE TABLE body
    params: Callable[[Any], dict] | str | None = None  # the run (its .cfg) -> the parameters hashed for the stage
    # (or "module:function" naming such a function)
    build: str | None = None  # "module:function" (run, progress) -> (tables, what ran | None); None: not a pair stage
    summary: str | None = None  # "module:function" (connection, summary so far) -> Summary.analysis(name)
    figures: str | None = None  # "module:attribute": a tuple of render-layer Figures it contributes
    page: Page | None = None
    optional: bool = True  # `precompute pair --skip` may leave it out
    pair_only: bool = False  # compares the tied matrix with an untied twin: not run on one tied model
    about: dict[str, str] = field(default_factory=dict)  # table -> what it holds, one line (docs/cache.md)

    def resolve(self, what: str) -> Any:
        """The function or value an entry names (``build``, ``params``, ``summary`` or ``figures``),
        imported now."""
        target = getattr(self, what)
        return resolve(target) if isinstance(target, str) else target


def resolve(target: str) -> Any:
    """``"package.module:name.attr"`` -> that object, importing the module."""
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


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


ANALYSES: tuple[Analysis, ...] = (
    Analysis("load", _ddl("models", "tokens", "norms"), about=_about("models", "tokens", "norms"), optional=False, build="precompute.stages:load_tables",
             params=lambda run: {"tied": run.cfg.tied, "untied": run.cfg.untied, "tied_revision": run.cfg.tied_revision,
                                 "untied_revision": run.cfg.untied_revision, "text": run.cfg.text,
                                 "match": run.cfg.match}),
    Analysis("alignment", _ddl("alignment", "alignment_summary"), about=_about("alignment", "alignment_summary"), build="precompute.stages:alignment_tables",
             params=lambda run: {"held_out": run.cfg.held_out, "seed": run.cfg.seed}, pair_only=True,
             page=Page("alignment.py", "Alignment", ":material/compare_arrows:", "alignment", needs="alignment",
                  about='per-token cosine of O->T against I->T by map and split (Figure 1); best- and worst-aligned tokens; norm vs frequency (Figure 5)')),
    Analysis("neighbours", _ddl("neighbours", "overlap_curve"), about=_about("neighbours", "overlap_curve"), build="precompute.stages:neighbours_tables",
             params=lambda run: {"k": run.cfg.neighbours_k},
             page=Page("neighbours.py", "Neighbours", ":material/hub:", "neighbours", needs="neighbours",
                  about="a token's nearest neighbours in T, I and O side by side; overlap@k (Table 5)")),
    Analysis("spectral", _ddl("spectral"), about=_about("spectral"), build="precompute.stages:spectral_tables", pair_only=True,
             params=lambda run: {"k": run.cfg.spectral_k, "components": run.cfg.spectral_components,
                                 "tokens": run.cfg.spectral_tokens, "seed": run.cfg.seed}),
    Analysis("cka", {"cka": """
                pair VARCHAR,
                n_tokens INTEGER,
                cka DOUBLE,
                cka_biased DOUBLE
            """},
             about={"cka": "linear CKA of each matrix pair over every common token: debiased (`cka`, Kornblith "
                           "et al. 2019 with the unbiased HSIC) and plain (`cka_biased`)"},
             build="tying.analysis.cka:cka_tables", summary="tying.analysis.cka:cka_summary",
             figures="explorer.render.cka:FIGURES", params=lambda run: {}, pair_only=True,
             page=Page("cka.py", "CKA", ":material/grid_on:", "cka", needs="cka",
                       about="linear CKA (debiased) of T~O, T~I and I~O: how alike the matrices are as wholes, "
                             "blind to rotations and scale")),
    Analysis("umap", _ddl("umap"), about=_about("umap"), build="precompute.stages:umap_tables", summary="tying.cache.summary:umap_summary",
             params="precompute.stages:umap_params",
             page=Page("projection.py", "Projection", ":material/map:", "projection", needs="umap",
                  about='aligned UMAP maps of I, T and O; click or search a token to follow it across the three')),
    Analysis("lens", _ddl("lens_kl", "lens_curve", "lens_trajectory"), about=_about("lens_kl", "lens_curve", "lens_trajectory"), build="precompute.stages:lens_tables",
             summary="tying.cache.summary:lens_summary",
             params=lambda run: run.cfg.lens.params() | {"budget": run.requested_lens_budget()},
             page=Page("lens.py", "Lens", ":material/layers:", "lens", needs="lens_kl",
                  about='tuned- and logit-lens KL per layer, and the prediction trajectory of your own text')),
    Analysis("training", _ddl("runs", "train_log", "evolution", "scaling", "seed_metrics"), about=_about("runs", "train_log", "evolution", "scaling", "seed_metrics"),
             page=Page("dynamics.py", "Training dynamics", ":material/trending_up:", "dynamics", needs="runs",
                  about="gradient provenance (Figure 4), embedding evolution (Figure 3), input-gradient scaling (Table 2), beside the paper's real runs")),
)
"""Every analysis, in the order ``precompute pair`` runs its stages (``training`` is the toy
lab's, written by ``precompute demo`` and the importers, not a pair stage)."""

BY_NAME = {a.name: a for a in ANALYSES}

PAGES: tuple[Page, ...] = (
    Page("tour.py", "Tour", ":material/school:", "tour",
                  about="the paper's argument in eleven steps, one screen and one verdict each, for a class or a talk"),
    # the default page, served at "/" (its own path is reserved yet not served: nobody types /index);
    # /overview and /home are its aliases (explorer/frame.py)
    Page("overview.py", "Overview", ":material/home:", "index", default=True,
                  about="the paper's claims with this cache's numbers and verdicts, the headline numbers beside the paper's"),
    *(a.page for a in ANALYSES if a.page is not None),
    Page("mechanism.py", "Why?", ":material/psychology_alt:", "mechanism", folder="mechanism",
         about="the mechanism lab: does balancing the output side's size (gradient or AdamW update), matching its "
               "reach, or SGD move T toward I, or only away from O, beyond what a rerun changes? 95% intervals over "
               "seeds"),
    Page("sweep.py", "Sweep", ":material/straighten:", "sweep", folder="sweep",
                  about="the width sweep: T's bias and the loss gap against width, with 95% intervals over seeds"),
)
"""The app's pages in menu order: the tour and the overview (every cache), each analysis's
page, and the mechanism lab and the width sweep of the cache folder."""

STAGE_TABLES: dict[str, tuple[str, ...]] = {a.name: tuple(a.tables) for a in ANALYSES}
"""The stages and the tables each one writes."""

PAIR_STAGES: tuple[str, ...] = tuple(a.name for a in ANALYSES if a.build is not None)
"""The stages ``precompute pair`` runs, in order."""

OPTIONAL_STAGES: tuple[str, ...] = tuple(a for a in PAIR_STAGES if BY_NAME[a].optional)
"""The stages ``precompute pair --skip`` may leave out."""

SINGLE_STAGES: tuple[str, ...] = tuple(a for a in PAIR_STAGES if not BY_NAME[a].pair_only)
"""The stages a run on one tied model (``precompute pair --tied X`` without ``--untied``) runs:
those that need no untied twin."""
