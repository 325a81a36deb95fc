"""`precompute pair`: load a tied/untied pair, run the embedding analyses, write the cache.

Stages (each written atomically, each skipped on a rerun when its inputs and parameters
are unchanged): load -> alignment -> neighbours -> spectral -> umap.
"""

from __future__ import annotations

import hashlib
import json
import platform
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import InitVar, asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from precompute.lens import LensOptions, lens_tables, lens_text, resolve_budget
from precompute.options import check_positive, internal, nested, option
from tying.cache import reference
from tying.cache.schema import MATRICES, MATRIX_PAIRS, PAIR_STAGES, pair_label
from tying.cache.store import CacheWriter, cache_path, check_name, default_name, params_hash
from tying.errors import UserError
from tying.loading.vocab import common_vocabulary
from tying.memory import peak_memory

STAGES = PAIR_STAGES
OPTIONAL_STAGES = ("alignment", "neighbours", "spectral", "umap", "lens")
MATCH_MODES = ("strings", "ids")
PLACEMENT = "knn10-softmax"
"""How the umap stage places the tokens it did not fit (part of its hash: a cache written before
placement existed reruns the stage and gains every common token)."""


@dataclass
class PairConfig:
    """What `precompute pair` (and `precompute lens`) does: each option field is the CLI option of
    its name (``--neighbours-k``; the lens stage's as ``--lens-*``), checked when the config is built."""

    tied: str | None = option(None, help="the tied model: a Hugging Face id or a local directory")
    untied: str | None = option(None, help="the untied model: a Hugging Face id or a local directory")
    name: str | None = option(None, shown="derived from the two models", help="cache name: `cache/<name>.duckdb`")
    tied_revision: str | None = option(None, shown="main", help="hub revision (branch, tag or commit) of the tied model")
    untied_revision: str | None = option(None, shown="main", help="hub revision of the untied model")
    preset: str | None = option(None, help="one of the paper's pairs, instead of `--tied` and `--untied`: "
                                + ", ".join(f"`{p}`" for p in reference.PRESETS))
    cache_dir: str = option("cache", help="folder of the caches")
    neighbours_k: int = option(50, help="neighbours stored per token; overlap@k for every k up to it")
    held_out: float = option(0.2, help="share of tokens held out to score fitted maps")
    spectral_k: int = option(64, help="k of the k-NN graphs of the spectral distance")
    spectral_components: int = option(128, help="dimensions of the adjacency spectral embedding")
    spectral_tokens: int | None = option(
        None, shown="all", help="a seeded sample of this many tokens for the spectral distance (for a CPU and a large "
        "vocabulary: 20,000 tokens took about 140 s per matrix pair on 2 CPU cores, and the eigensolver grows faster "
        "than linearly); by default every common token, as the paper; a sampled result says so in the summary and "
        "the app")
    umap_tokens: int = option(20000, help="tokens UMAP is fitted on (a seeded sample above); every other common "
                              "token is placed into the same map from its 10 nearest fitted tokens")
    umap_epochs: int = option(100, help="UMAP optimisation epochs (on an OLMo-shaped pair, 20,000 tokens fitted: the "
                              "umap stage took 270 s at 100 against 339 s at 200, trustworthiness@10 0.938 against "
                              "0.943; 200 is umap-learn's own default for large inputs)")
    match: str = option("strings", choices=MATCH_MODES, help="how rows of two different tokenizers are paired: "
                        "`strings` (the token strings both contain) or `ids` (row i with row i, as the paper's Table 1 "
                        "for GPT-Neo vs Pythia); recorded in the cache")
    seed: int = option(0, help="seed of the held-out split and the samples")
    text: str | None = option(None, help="a text file: token frequencies for the norm-vs-frequency view")
    skip: list[str] = option([], help="comma-separated stages to skip: `" + ",".join(OPTIONAL_STAGES) + "`")
    skip_lens: InitVar[bool] = option(False, help="skip the lens stage (same as `--skip lens`)")
    force: bool = option(False, help="recompute every stage, even if cached")
    device: str | None = option(None, shown="`cuda` when present, else `cpu`", help="torch device")
    trust_remote_code: bool = option(False, help="allow a hub model's own code to run (off by default)")
    min_common_tokens: int = internal(100)
    kind: str = internal("pair")  # 'toylab' when the toy lab's twins are analysed
    lens: LensOptions = nested(LensOptions, prefix="lens-")
    command: str | None = internal(None)  # the command line that built the cache (for rebuild hints)

    def __post_init__(self, skip_lens: bool) -> None:
        if self.preset:
            ids = preset_config(self.preset)
            self.tied, self.untied = self.tied or ids["tied"], self.untied or ids["untied"]
        if skip_lens and "lens" not in self.skip:
            self.skip = [*self.skip, "lens"]
        self.check()

    def check(self) -> None:
        """UserError (one line, naming the option) for the first bad setting."""
        if not self.tied or not self.untied:
            raise UserError("give both --tied and --untied (or --preset)")
        if self.name is not None:
            check_name(self.name)
        check_positive(self, "neighbours_k", "spectral_k", "spectral_components", "spectral_tokens", "umap_tokens",
                       "umap_epochs", "lens.steps", "lens.batch_size", "lens.seq_len", "lens.tokens_per_step",
                       "lens.train_tokens", "lens.eval_tokens")
        if self.match not in MATCH_MODES:
            raise UserError(f"--match must be one of {', '.join(MATCH_MODES)}, got '{self.match}'")
        if not 0.0 < self.held_out < 1.0:
            raise UserError(f"--held-out must be between 0 and 1, got {self.held_out}")
        unknown = set(self.skip) - set(OPTIONAL_STAGES)
        if unknown:
            raise UserError(f"unknown stage(s) to skip: {', '.join(sorted(unknown))} "
                            f"(choose from {', '.join(OPTIONAL_STAGES)})")
        if self.text is not None and not Path(self.text).is_file():
            raise UserError(f"text file '{self.text}' does not exist")
        if "lens" not in self.skip and self.lens.text != "python-docs" and not self.lens.text.startswith("hf:"):
            lens_text(self.lens.text, self.lens.max_chars)  # a bad local lens text fails before any file is written


def validate(cfg: PairConfig) -> None:
    """The checks of :meth:`PairConfig.check` again, for a config changed after it was built."""
    cfg.check()


def library_versions() -> dict[str, str]:
    import duckdb
    import faiss
    import torch
    import transformers

    out = {"python": platform.python_version(), "numpy": np.__version__, "torch": torch.__version__,
           "transformers": transformers.__version__, "duckdb": duckdb.__version__, "faiss": faiss.__version__}
    try:
        import umap

        out["umap-learn"] = getattr(umap, "__version__", "?")
    except Exception:  # umap is optional until the umap stage runs
        pass
    return out


def _sample(n: int, limit: int, seed: int) -> np.ndarray:
    """Sorted row indices: all rows when n <= limit, else a seeded random sample of ``limit``."""
    if n <= limit:
        return np.arange(n)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=limit, replace=False))


def token_frequencies(tokenizer_dir: str, text_path: str, n_vocab: int) -> np.ndarray:
    """Counts of each token id of a tokenizer over a text file; array of shape (n_vocab,)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    counts = np.zeros(n_vocab, dtype=np.int64)
    with open(text_path, encoding="utf-8", errors="replace") as fh:
        lines = fh.readlines()
    for start in range(0, len(lines), 2000):
        chunk = [ln for ln in lines[start:start + 2000] if ln.strip()]
        if not chunk:
            continue
        ids = np.concatenate([np.asarray(x, dtype=np.int64) for x in tok(chunk, add_special_tokens=False)["input_ids"]] or [np.zeros(0, np.int64)])
        ids = ids[ids < n_vocab]
        counts += np.bincount(ids, minlength=n_vocab)
    return counts


class PairRun:
    """One `precompute pair` run. ``PairRun(cfg).run()`` returns the cache path."""

    def __init__(self, cfg: PairConfig, log: Callable[[str], None] | None = None):
        validate(cfg)
        self.cfg = cfg
        self.name = cfg.name or default_name(cfg.tied, cfg.untied)
        self.path = cache_path(cfg.cache_dir, self.name)
        self.log = log or (lambda msg: tqdm.write(msg, file=sys.stderr))
        self._knn: dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray]] = {}

    # -- stage: load -----------------------------------------------------------------
    def load(self):
        from tying.loading.device import pick_device
        from tying.loading.weights import load_model_matrices

        cfg = self.cfg
        self.device = pick_device(cfg.device)
        tied = load_model_matrices(cfg.tied, cfg.tied_revision, role="tied", trust_remote_code=cfg.trust_remote_code)
        untied = load_model_matrices(cfg.untied, cfg.untied_revision, role="untied", trust_remote_code=cfg.trust_remote_code)
        vocab = common_vocabulary(tied.tokens, untied.tokens, tied.token_texts, min_tokens=cfg.min_common_tokens,
                                  match=cfg.match)
        self.models, self.vocab = {"tied": tied, "untied": untied}, vocab
        self.matrices = {
            "T": tied.input[vocab.tied_ids] if not vocab.identical else tied.input,
            "I": untied.input[vocab.untied_ids] if not vocab.identical else untied.input,
            "O": untied.output[vocab.untied_ids] if not vocab.identical else untied.output,
        }
        self.n = len(vocab.tokens)
        self.input_hash = params_hash(
            {"tied": tied.fingerprint, "untied": untied.fingerprint, "n": self.n, "match": vocab.match,
             "text": cfg.text and _file_digest(cfg.text)}
        )

    def load_tables(self) -> dict[str, pd.DataFrame]:
        cfg, vocab = self.cfg, self.vocab
        freq = {"tied": None, "untied": None}
        if cfg.text:
            for role, ids in (("tied", vocab.tied_ids), ("untied", vocab.untied_ids)):
                m = self.models[role]
                freq[role] = token_frequencies(m.local_dir, cfg.text, m.n_vocab)[ids]
        tokens = pd.DataFrame({
            "token": np.arange(self.n, dtype=np.int32),
            "raw": vocab.tokens,
            "text": vocab.texts,
            "tied_id": vocab.tied_ids.astype(np.int32),
            "untied_id": vocab.untied_ids.astype(np.int32),
            "freq_tied": freq["tied"] if freq["tied"] is not None else pd.array([None] * self.n, dtype="Int64"),
            "freq_untied": freq["untied"] if freq["untied"] is not None else pd.array([None] * self.n, dtype="Int64"),
        })
        norms = pd.concat([
            pd.DataFrame({"matrix": key, "token": np.arange(self.n, dtype=np.int32),
                          "norm": np.linalg.norm(mat, axis=1).astype(np.float32)})
            for key, mat in self.matrices.items()
        ])
        rows = []
        for role, m in self.models.items():
            rows.append({
                "role": role, "source": m.source, "revision": m.revision, "commit_sha": m.commit,
                "model_type": m.model_type, "tied_in_weights": bool(m.tied), "d_model": int(m.d_model),
                "n_vocab": int(m.n_vocab), "n_rows_stored": int(m.n_rows_stored), "n_params": int(m.n_params),
                "n_embedding_params": int(m.n_embedding_params), "embedding_share": float(m.embedding_share),
                "dtype": str(m.dtype), "input_key": m.input_key, "output_key": m.output_key,
                "fingerprint": json.dumps(m.fingerprint, sort_keys=True), "files": json.dumps(m.files, default=str),
                "load_seconds": float(m.seconds),
            })
        return {"models": pd.DataFrame(rows), "tokens": tokens, "norms": norms}

    # -- stage: alignment ------------------------------------------------------------
    def alignment_tables(self, progress) -> dict[str, pd.DataFrame]:
        from tying.analysis.align import run_alignment

        results = run_alignment(self.matrices, held_out_fraction=self.cfg.held_out, seed=self.cfg.seed,
                                device=self.device, progress=progress)
        per_token, summary = [], []
        for r in results:
            summary.append({k: r[k] for k in ("comparison", "method", "split", "applicable", "note")}
                           | {"n_tokens": int(len(r["cosine"])), "mean": float(r["mean"]), "std": float(r["std"])})
            if r["applicable"]:
                per_token.append(pd.DataFrame({
                    "comparison": r["comparison"], "method": r["method"], "split": r["split"],
                    "token": np.asarray(r["token_idx"], dtype=np.int32), "cosine": np.asarray(r["cosine"], np.float32),
                }))
        frame = pd.concat(per_token) if per_token else pd.DataFrame(
            columns=["comparison", "method", "split", "token", "cosine"])
        return {"alignment": frame, "alignment_summary": pd.DataFrame(summary)}, None

    # -- k-NN, shared by neighbours and spectral -------------------------------------------
    def knn(self, key: str, k: int, rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Top-k neighbours of matrix ``key`` (within ``rows`` if given), memoised for the run."""
        from tying.analysis.neighbours import knn

        subset = -1 if rows is None else len(rows)
        for (mkey, mk, msub), (ids, scores) in self._knn.items():
            if mkey == key and msub == subset and mk >= k:
                return ids[:, :k], scores[:, :k]
        mat = self.matrices[key] if rows is None else self.matrices[key][rows]
        ids, scores = knn(mat, k, device=self.device)
        self._knn[(key, k, subset)] = (ids, scores)
        return ids, scores

    def neighbours_tables(self, progress) -> tuple[dict[str, pd.DataFrame], dict]:
        from tying.analysis.neighbours import overlap_curve

        K = self.cfg.neighbours_k
        if self.n <= K:
            raise UserError(f"--neighbours-k {K} is not smaller than the {self.n} common tokens")
        # compute enough neighbours once for the spectral stage too, when it uses every token
        k_compute = max(K, min(self.cfg.spectral_k, self.n - 1)) if self.spectral_rows() is None else K
        ids, frames = {}, []
        for key in MATRICES:
            progress(f"k-NN {key}")
            i, s = self.knn(key, k_compute)
            ids[key] = i[:, :K]
            frames.append(pd.DataFrame({
                "matrix": key,
                "token": np.repeat(np.arange(self.n, dtype=np.int32), K),
                "rank": np.tile(np.arange(1, K + 1, dtype=np.int16), self.n),
                "neighbour": i[:, :K].reshape(-1).astype(np.int32),
                "score": s[:, :K].reshape(-1).astype(np.float32),
            }))
        curves = []
        for a, b in MATRIX_PAIRS:
            c = overlap_curve(ids[a], ids[b], K)
            curves.append(pd.DataFrame({"pair": pair_label(a, b), "k": np.arange(1, K + 1, dtype=np.int32),
                                        "mean_overlap": np.asarray(c, dtype=np.float64)}))
        return {"neighbours": pd.concat(frames), "overlap_curve": pd.concat(curves)}, {"k": int(K)}

    # -- stage: spectral -----------------------------------------------------------------
    def spectral_tables(self, progress) -> tuple[dict[str, pd.DataFrame], dict]:
        """The spectral table, and what ran: the graphs' k, the embedding's components (as
        :func:`~tying.analysis.spectral.spectral_comparison` used them) and the tokens."""
        from tying.analysis.spectral import spectral_comparison

        cfg = self.cfg
        rows = self.spectral_rows()
        n_used = self.n if rows is None else len(rows)
        ids = {}
        for key in MATRICES:
            progress(f"k-NN graph {key}")
            ids[key] = self.knn(key, min(cfg.spectral_k, n_used - 1), rows)[0]
        graph_k = int(ids[MATRICES[0]].shape[1])
        out = []
        for a, b in MATRIX_PAIRS:
            progress(f"spectral {pair_label(a, b)}")
            d, components = spectral_comparison(ids[a], ids[b], n_components=cfg.spectral_components)
            out.append({"pair": pair_label(a, b), "graph_k": graph_k, "n_components": components,
                        "n_tokens": n_used, "n_common": self.n, "sampled": rows is not None,
                        "distance": float(d)})
        used = sorted({r["n_components"] for r in out})
        ran = {"k": graph_k, "components": used[0] if len(used) == 1 else used, "tokens": n_used,
               "sampled": rows is not None}
        return {"spectral": pd.DataFrame(out)}, ran

    def spectral_rows(self) -> np.ndarray | None:
        """Rows of the spectral distance: None for every common token, else a seeded sample."""
        limit = self.cfg.spectral_tokens
        return None if limit is None or self.n <= limit else _sample(self.n, limit, self.cfg.seed)

    # -- stage: umap ---------------------------------------------------------------------
    def umap_tables(self, progress) -> tuple[dict[str, pd.DataFrame], dict]:
        """The umap table: AlignedUMAP fitted on a seeded sample of ``--umap-tokens`` common tokens,
        every other common token placed into the same coordinates from its 10 nearest fitted
        tokens (:func:`~tying.analysis.projection.project`), per matrix. What ran: the fitted
        and placed counts, the epochs and the placement's settings and quality
        (``placement``: per matrix T, I, O trustworthiness@10 and nearest-drawn-neighbour share
        of placed and of fitted tokens, the hold-out check; see :func:`placement_record`)."""
        from tying.analysis.projection import project

        rows = _sample(self.n, self.cfg.umap_tokens, self.cfg.seed)
        progress(f"UMAP of {len(rows):,} tokens x 3 matrices" + (f", then {self.n - len(rows):,} placed"
                                                                  if len(rows) < self.n else ""))
        proj = project([self.matrices[k] for k in MATRICES], rows, seed=self.cfg.seed, n_epochs=self.cfg.umap_epochs,
                       progress=progress)
        frames = [pd.DataFrame({"matrix": key, "token": np.arange(self.n, dtype=np.int32),
                                "x": c[:, 0].astype(np.float32), "y": c[:, 1].astype(np.float32),
                                "placed": proj.placed})
                  for key, c in zip(MATRICES, proj.coords)]
        ran = {"tokens": int(len(rows)), "placed": int(proj.placed.sum()), "epochs": int(self.cfg.umap_epochs),
               "placement": placement_record(proj.quality)}
        return {"umap": pd.concat(frames)}, ran

    # -- stage: lens ---------------------------------------------------------------------
    def lens_tables(self, progress) -> tuple[dict[str, pd.DataFrame], dict]:
        """The lens tables, and the budget each model's tuned lens trained with (``{role: budget}``)."""
        lens_dir = Path(self.cfg.cache_dir) / "lens" / self.name
        lens_dir.mkdir(parents=True, exist_ok=True)
        return lens_tables({role: m.local_dir for role, m in self.models.items()}, self.cfg.lens,
                           lens_dir=lens_dir, device=self.device, trust_remote_code=self.cfg.trust_remote_code,
                           progress=progress, log=self.log, gpu_command=lens_gpu_command(self.cfg, self.name),
                           cache=str(self.path))

    def requested_lens_budget(self) -> dict:
        """The lens options' budget on this run's device before any model's context is known.

        Only part of the lens stage's hash (so a rerun on another kind of device retrains, and
        caches written before issue 18 keep their hash); never recorded as what ran: each
        model's budget is resolved once, with its context, by the stage itself.
        """

        tokens, accumulate, train_tokens = resolve_budget(self.cfg.lens, self.device)
        return {"steps": int(self.cfg.lens.steps), "tokens_per_step": tokens, "accumulate": accumulate,
                "batch_size": int(self.cfg.lens.batch_size), "seq_len": int(self.cfg.lens.seq_len),
                "train_tokens": train_tokens, "device": self.device.type}

    # -- orchestration -------------------------------------------------------------------
    def stage_params(self, stage: str) -> dict:
        c = self.cfg
        own = {
            "load": {"tied": c.tied, "untied": c.untied, "tied_revision": c.tied_revision,
                     "untied_revision": c.untied_revision, "text": c.text, "match": c.match},
            "alignment": {"held_out": c.held_out, "seed": c.seed},
            "neighbours": {"k": c.neighbours_k},
            "spectral": {"k": c.spectral_k, "components": c.spectral_components, "tokens": c.spectral_tokens,
                         "seed": c.seed},
            "umap": {"tokens": c.umap_tokens, "seed": c.seed, "epochs": c.umap_epochs, "placement": PLACEMENT},
            "lens": c.lens.params() | {"budget": self.requested_lens_budget()},
        }[stage]
        return {"stage": stage, "inputs": self.input_hash, **own}

    @staticmethod
    def recorded_params(stage: str, params: dict, ran: dict | None) -> dict:
        """What the cache records for a finished stage: the requested ``params`` with what ran.

        ``ran`` is what the stage returned as the parameters it actually used (None: nothing
        beyond the request). The lens stage's ``budget`` becomes the budget each model
        trained with, ``{role: {..., seq_len, accumulate, tokens_per_step, device}}``, in place
        of the request's, which did not know the models' contexts; every other stage keeps
        its requested values and adds ``ran`` (spectral: k, components, tokens, sampled;
        neighbours: k; umap: tokens (fitted), placed, epochs, placement). The stage's hash stays
        that of ``params``.
        """
        if ran is None:
            return params
        if stage == "lens":
            return {**params, "budget": ran}
        return {**params, "ran": ran}

    def run(self) -> Path:
        cfg = self.cfg
        todo = [s for s in STAGES if s not in cfg.skip]
        bar = tqdm(total=len(todo) + 1, desc=f"pair {self.name}", unit="stage", file=sys.stderr, disable=None)
        try:
            bar.set_postfix_str("loading matrices")
            peak_memory(reset=True)
            self.load()
            if "neighbours" in todo and cfg.neighbours_k >= self.n:
                raise UserError(f"--neighbours-k {cfg.neighbours_k} is not smaller than the {self.n} common tokens")
            bar.update(1)
            meta = {
                "name": self.name, "kind": cfg.kind, "preset": cfg.preset,
                "command": cfg.command or f"python -m precompute pair --tied {shlex.quote(cfg.tied)} "
                f"--untied {shlex.quote(cfg.untied)} --name {self.name}",
                "config": asdict(cfg), "versions": library_versions(), "device": str(self.device),
                "vocabulary": {"n_common": self.n, "n_tied": self.vocab.n_tied, "n_untied": self.vocab.n_untied,
                               "coverage_tied": self.vocab.coverage_tied,
                               "coverage_untied": self.vocab.coverage_untied, "identical": self.vocab.identical,
                               "match": self.vocab.match, "same_string": self.vocab.same_string},
            }
            writer = CacheWriter(self.path, force=cfg.force, meta=meta)
            builders = {"load": lambda p: (self.load_tables(), None), "alignment": self.alignment_tables,
                        "neighbours": self.neighbours_tables, "spectral": self.spectral_tables,
                        "umap": self.umap_tables, "lens": self.lens_tables}
            for stage in todo:
                params = self.stage_params(stage)
                phash = params_hash(params)
                if writer.is_done(stage, phash):
                    bar.set_postfix_str(f"{stage}: cached")
                    bar.update(1)
                    continue
                bar.set_postfix_str(stage)
                t0 = time.perf_counter()
                tables, ran = builders[stage](lambda msg, s=stage: bar.set_postfix_str(f"{s}: {msg}"))
                seconds = time.perf_counter() - t0
                if stage == "load":
                    seconds += sum(m.seconds for m in self.models.values())
                writer.write_stage(stage, params, tables, seconds=seconds, invalidate_others=(stage == "load"),
                                   record=self.recorded_params(stage, params, ran))
                peak = peak_memory(reset=True)
                self.log(f"stage {stage}: {seconds:.1f} s" + (f", peak memory {peak / 2**30:.2f} GB" if peak else ""))
                bar.update(1)
        finally:
            bar.close()
        return self.path


def lens_gpu_command(cfg: PairConfig, name: str) -> str:
    """The ``precompute lens`` command that trains this run's lenses on a CUDA GPU into the same
    cache: the same models, revisions, matching and --text (the load stage must find itself
    finished, or it would start the cache afresh), the same name and cache folder, every lens
    option set away from its default, and ``--device cuda``."""
    from precompute.options import specs

    argv = ["--preset", cfg.preset] if cfg.preset else ["--tied", cfg.tied, "--untied", cfg.untied]
    for flag, value in (("--tied-revision", cfg.tied_revision), ("--untied-revision", cfg.untied_revision),
                        ("--text", cfg.text), ("--match", None if cfg.match == "strings" else cfg.match)):
        if value is not None:
            argv += [flag, value]
    argv += ["--name", name, "--cache-dir", cfg.cache_dir]
    for spec in specs(LensOptions, "lens-", "lens."):
        value = getattr(cfg.lens, spec.dest.split(".", 1)[1])
        if value != spec.default:
            argv += [spec.flag, str(value)]
    if cfg.trust_remote_code:
        argv.append("--trust-remote-code")
    return "python -m precompute lens " + shlex.join([*map(str, argv), "--device", "cuda"])


def placement_record(quality: dict) -> dict:
    """:attr:`~tying.analysis.projection.Projection.quality` as the umap stage records it: the
    views "0", "1", "2" named T, I and O, numbers rounded to 4 decimals (JSON-able)."""
    def clean(x):
        if isinstance(x, dict):
            return {k: clean(v) for k, v in x.items()}
        return round(float(x), 4) if isinstance(x, float) else x

    names = {str(i): key for i, key in enumerate(MATRICES)}
    return clean({names.get(k, k): v for k, v in quality.items()})


def _file_digest(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def preset_config(name: str) -> dict[str, str]:
    if name not in reference.PRESETS:
        raise UserError(f"unknown preset '{name}' (choose from {', '.join(reference.PRESETS)})")
    return reference.PRESETS[name]
