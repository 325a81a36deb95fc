"""`precompute pair`: load a tied/untied pair, run the embedding analyses, write the cache.

Stages (each written atomically, each skipped on a rerun when its inputs and parameters
are unchanged): the registry's, in its order (load -> alignment -> neighbours -> spectral
-> cka -> umap -> lens). Given ``--tied`` alone, the run is on one tied model (the cache's
kind is ``model``): it runs the stages that need no untied twin
(:data:`~tying.registry.SINGLE_STAGES`: load, neighbours, umap, lens) on its matrix T. Each
stage's parameters and builder: :data:`precompute.stages.STAGES`.
"""

from __future__ import annotations

import importlib.metadata
import platform
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import InitVar, asdict, dataclass
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from precompute.lens import LensOptions, lens_text, model_budget
from precompute.options import cache_dir_option, check_positive, device_option, internal, nested, option
from precompute.stages import STAGES
from tying.analysis.placement import PLACE_K
from tying.analysis.umap_fit import EPOCHS as UMAP_EPOCHS
from tying.cache import reference
from tying.cache.schema import CEILING
from tying.cache.store import (
    cache_path,
    check_name,
    default_name,
    held_sources,
    params_hash,
    same_source,
    short_name,
)
from tying.cache.writer import CacheWriter, forced_path, publish, remove_stale_temporaries
from tying.errors import UserError
from tying.loading.model_matrices import file_sha256
from tying.loading.vocab import common_vocabulary
from tying.memory import peak_memory
from tying.registry import BY_NAME, OPTIONAL_STAGES, PAIR_STAGES, SINGLE_STAGES

MATCH_MODES = ("strings", "ids")


@dataclass
class PairConfig:
    """What `precompute pair` (and `precompute lens`) does: each option field is the CLI option of
    its name (``--neighbours-k``; the lens stage's as ``--lens-*``), checked when the config is built."""

    tied: str | None = option(None, help="the tied model: a Hugging Face id, a local directory or a GGUF file")
    untied: str | None = option(None, help="the untied model: a Hugging Face id, a local directory or a GGUF file; "
                                "without it, the run is on the tied model alone (its neighbours, map and lenses)")
    name: str | None = option(None, shown="derived from the two models", help="cache name: `cache/<name>.duckdb`")
    tied_revision: str | None = option(None, shown="main", help="hub revision (branch, tag or commit) of the tied model")
    untied_revision: str | None = option(None, shown="main", help="hub revision of the untied model")
    ceiling: str | None = option(None, help="a second tied model trained like `--tied` from another start (the toy "
                                 "lab's T'): how alike two runs of T are, the ceiling beside O->T and I->T in the "
                                 "alignment, overlap, spectral and CKA tables; same tokenizer as `--tied`")
    preset: str | None = option(None, help="one of the paper's pairs, instead of `--tied` and `--untied`: "
                                + ", ".join(f"`{p}`" for p in reference.PRESETS))
    cache_dir: str = cache_dir_option()
    neighbours_k: int = option(50, help="neighbours stored per token; overlap@k for every k up to it")
    text_is_training: bool = internal(False)  # `text` is what the models trained on (the toy lab's corpus)
    held_out: float = option(0.2, help="share of tokens held out to score fitted maps")
    spectral_k: int = option(64, help="k of the k-NN graphs of the spectral distance")
    spectral_components: int = option(128, help="dimensions of the adjacency spectral embedding")
    spectral_tokens: int | None = option(
        None, shown="all", help="a seeded sample of this many tokens for the spectral distance (for a CPU and a large "
        "vocabulary: 20,000 tokens took about 140 s per matrix pair on 2 CPU cores, and the eigensolver grows faster "
        "than linearly); by default every common token, as the paper; a sampled result says so in the summary and "
        "the app")
    umap_tokens: int = option(20000, help="tokens UMAP is fitted on (a seeded sample above); every other common "
                              f"token is placed into the same map from its {PLACE_K} nearest fitted tokens")
    umap_epochs: int = option(UMAP_EPOCHS, help="UMAP optimisation epochs (on an OLMo-shaped pair, 20,000 tokens "
                              "fitted: the umap stage took 270 s at 100 against 339 s at 200, trustworthiness@10 0.938 "
                              "against 0.943; 200 is umap-learn's own default for large inputs)")
    match: str = option("strings", choices=MATCH_MODES, help="how rows of two different tokenizers are paired: "
                        "`strings` (the token strings both contain) or `ids` (row i with row i, as the paper's Table 1 "
                        "for GPT-Neo vs Pythia); recorded in the cache")
    seed: int = option(0, help="seed of the held-out split and the samples")
    text: str | None = option(None, help="a text file: token frequencies for the norm-vs-frequency view")
    skip: list[str] = option([], help="comma-separated stages to skip: `" + ",".join(OPTIONAL_STAGES) + "`")
    skip_lens: InitVar[bool] = option(False, help="skip the lens stage (same as `--skip lens`)")
    force: bool = option(False, help="recompute every stage, even if cached")
    device: str | None = device_option()
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

    @property
    def single(self) -> bool:
        """One tied model and no untied twin."""
        return not self.untied

    def check(self) -> None:
        """UserError (one line, naming the option) for the first bad setting."""
        if not self.tied:
            raise UserError("give --tied (with --untied for a pair, or --preset)")
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
        if self.single and self.match != "strings":
            raise UserError("--match pairs two vocabularies: give --untied too")
        if self.single and self.ceiling:
            raise UserError("--ceiling is read against a pair: give --untied too")
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
    # umap-learn's version from its installed metadata, not by importing it: the import compiles
    # pynndescent's numba kernels (16 s of a core on a fresh install, 2.9 s from numba's cache, in every
    # process), which a run without the umap stage never needs
    try:
        out["umap-learn"] = importlib.metadata.version("umap-learn")
    except importlib.metadata.PackageNotFoundError:  # umap is optional until the umap stage runs
        pass
    return out


class PairRun:
    """One `precompute pair` run. ``PairRun(cfg).run()`` returns the cache path."""

    def __init__(self, cfg: PairConfig, log: Callable[[str], None] | None = None):
        validate(cfg)
        self.cfg = cfg
        self.name = cfg.name or (short_name(cfg.tied) if cfg.single else default_name(cfg.tied, cfg.untied))
        self.path = cache_path(cfg.cache_dir, self.name)
        self.log = log or (lambda msg: tqdm.write(msg, file=sys.stderr))
        self._knn: dict[tuple[str, int, int], tuple[np.ndarray, np.ndarray]] = {}
        self._text_counts: dict[str, np.ndarray] = {}
        self.write_path: Path | None = None  # a caller's staged file to write into (and publish itself)

    # -- stage: load -----------------------------------------------------------------
    def load(self):
        from tying.device import pick_device
        from tying.loading.weights import load_model_matrices

        cfg = self.cfg
        self.device = pick_device(cfg.device)
        tied = load_model_matrices(cfg.tied, cfg.tied_revision, role="tied", trust_remote_code=cfg.trust_remote_code)
        if cfg.single:  # every token of the one model, its matrix T
            vocab = common_vocabulary(tied.tokens, tied.tokens, tied.token_texts, min_tokens=cfg.min_common_tokens)
            self.models, self.vocab = {"tied": tied}, vocab
            self.matrices = {"T": tied.input}
        else:
            untied = load_model_matrices(cfg.untied, cfg.untied_revision, role="untied",
                                         trust_remote_code=cfg.trust_remote_code)
            vocab = common_vocabulary(tied.tokens, untied.tokens, tied.token_texts, min_tokens=cfg.min_common_tokens,
                                      match=cfg.match)
            self.models, self.vocab = {"tied": tied, "untied": untied}, vocab
            self.matrices = {
                "T": tied.input[vocab.tied_ids] if not vocab.identical else tied.input,
                "I": untied.input[vocab.untied_ids] if not vocab.identical else untied.input,
                "O": untied.output[vocab.untied_ids] if not vocab.identical else untied.output,
            }
        self.ceiling = None
        if cfg.ceiling:  # a second tied run: T' over the same tokens as T
            try:
                self.ceiling = load_model_matrices(cfg.ceiling, role="tied", trust_remote_code=cfg.trust_remote_code)
            except UserError as e:
                raise UserError(f"--ceiling: {e}") from None
            if list(self.ceiling.tokens) != list(tied.tokens):
                raise UserError(f"--ceiling {cfg.ceiling}: its vocabulary is not the tied model's (a second run of "
                                "the tied model has the same tokenizer)")
            self.matrices[CEILING] = self.ceiling.input[vocab.tied_ids] if not vocab.identical else self.ceiling.input
        self.n = len(vocab.tokens)
        self.input_hash = params_hash(
            {"tied": tied.fingerprint, "untied": self.models["untied"].fingerprint if "untied" in self.models else None,
             "n": self.n, "match": vocab.match, "text": cfg.text and file_sha256(cfg.text),
             **({"ceiling": self.ceiling.fingerprint} if self.ceiling is not None else {})}
        )

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

    # -- token counts of --text, shared by load and token_traits -------------------------------
    def text_counts(self, role: str) -> np.ndarray:
        """Each common token's count in ``--text`` by model ``role``'s tokenizer, memoised for the run."""
        from precompute.stages import token_frequencies

        if role not in self._text_counts:
            m, ids = self.models[role], self.vocab.tied_ids if role == "tied" else self.vocab.untied_ids
            self._text_counts[role] = token_frequencies(m.local_dir, self.cfg.text, m.n_vocab)[ids]
        return self._text_counts[role]

    def check_lens_from(self) -> None:
        """UserError (one line) when a ``--lens-from`` lens has another width or number of hidden
        states than its model (read from the model's config.json, where it has one)."""
        import json

        from precompute.lens_io import lens_folder
        from tying.lens.interop import read_config

        for role, m in self.models.items():
            folder = lens_folder(self.cfg.lens.from_dir, role)
            config = Path(m.local_dir or "") / "config.json"
            if folder is None or not m.local_dir or not config.is_file():
                continue
            model = json.loads(config.read_text())
            model = model.get("text_config", model)
            lens = read_config(folder)
            want = (model.get("num_hidden_layers"), model.get("hidden_size"))
            if None not in want and (lens["num_hidden_layers"], lens["d_model"]) != want:
                raise UserError(f"--lens-from: the lens in {folder} has {lens['num_hidden_layers']} translators of "
                                f"width {lens['d_model']}; the {role} model needs {want[0]} of width {want[1]}")

    def requested_lens_budget(self) -> dict:
        """The lens options' budget on this run's device before any model's context is known.

        Only part of the lens stage's hash (so a rerun on another kind of device retrains, and
        caches written before issue 18 keep their hash); never recorded as what ran: each
        model's budget is resolved once, with its context, by the stage itself.
        """

        from dataclasses import replace

        return replace(model_budget(self.cfg.lens, self.device, None), device=self.device.type).to_dict()

    # -- orchestration -------------------------------------------------------------------
    def can_run(self, stage: str) -> bool:
        """Whether this run's models give the stage what it needs (the registry's ``needs``): a stage
        that runs a model is left out where a model's file holds only its matrices."""
        return "model" not in BY_NAME[stage].needs or all(m.runs for m in self.models.values())

    def stage_params(self, stage: str) -> dict:
        """The parameters the stage's hash covers: what its registry entry reads from this run."""
        return {"stage": stage, "inputs": self.input_hash, **STAGES[stage].params(self)}

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
        todo = [s for s in (SINGLE_STAGES if cfg.single else PAIR_STAGES) if s not in cfg.skip]
        bar = tqdm(total=len(todo) + 1, desc=f"pair {self.name}", unit="stage", file=sys.stderr, disable=None)
        try:
            bar.set_postfix_str("loading matrices")
            peak_memory(reset=True)
            self.load()
            still = [s for s in todo if self.can_run(s)]
            for stage in (s for s in todo if s not in still):
                self.log(f"stage {stage}: skipped: it runs the model, and "
                         + ", ".join(m.source for m in self.models.values() if not m.runs)
                         + " holds only the matrices")
            todo, bar.total = still, len(still) + 1
            if "lens" in todo and cfg.lens.from_dir:
                self.check_lens_from()  # against the models' shapes, before any stage writes anything
            if "neighbours" in todo and cfg.neighbours_k >= self.n:
                raise UserError(f"--neighbours-k {cfg.neighbours_k} is not smaller than the {self.n} common tokens")
            bar.update(1)
            untied = "" if cfg.single else f"--untied {shlex.quote(cfg.untied)} "
            meta = {
                "name": self.name, "kind": "model" if cfg.single else cfg.kind, "preset": cfg.preset,
                "command": cfg.command or f"python -m precompute pair --tied {shlex.quote(cfg.tied)} "
                f"{untied}--name {self.name}",
                "config": asdict(cfg), "versions": library_versions(), "device": str(self.device),
                "vocabulary": {"n_common": self.n, "n_tied": self.vocab.n_tied,
                               "n_untied": None if cfg.single else self.vocab.n_untied,
                               "coverage_tied": self.vocab.coverage_tied,
                               "coverage_untied": None if cfg.single else self.vocab.coverage_untied,
                               "identical": self.vocab.identical, "match": self.vocab.match,
                               "same_string": self.vocab.same_string},
            }
            # --force writes beside the cache and renames over it when every stage is done: a killed
            # rebuild leaves the previous cache whole (a caller that goes on writing, the demo, publishes)
            staged = self.write_path or (forced_path(self.path) if cfg.force else self.path)
            held = {} if cfg.force or self.write_path else held_sources(self.path)
            mine = {role: m.source for role, m in self.models.items()}
            if held and (set(held) != set(mine) or not all(same_source(held[r], mine[r]) for r in mine)):
                was = ", ".join(f"{r} {held[r]}" for r in sorted(held))
                raise UserError(f"'{self.path}' holds another run ({was}): choose another --name, or pass --force "
                                "to replace it")
            if staged != self.path:  # with --force: what a stopped earlier rebuild left beside the cache goes
                remove_stale_temporaries(self.path)
            writer = CacheWriter(staged, force=cfg.force, meta=meta)
            for stage in todo:
                params = self.stage_params(stage)
                phash = params_hash(params)
                if writer.is_done(stage, phash):
                    bar.set_postfix_str(f"{stage}: cached")
                    bar.update(1)
                    continue
                bar.set_postfix_str(stage)
                t0 = time.perf_counter()
                tables, ran = STAGES[stage].build(self, lambda msg, s=stage: bar.set_postfix_str(f"{s}: {msg}"))
                seconds = time.perf_counter() - t0
                if stage == "load":
                    seconds += sum(m.seconds for m in self.models.values())
                writer.write_stage(stage, params, tables, seconds=seconds, invalidate_others=(stage == "load"),
                                   record=self.recorded_params(stage, params, ran))
                peak = peak_memory(reset=True)
                self.log(f"stage {stage}: {seconds:.1f} s" + (f", peak memory {peak / 2**30:.2f} GB" if peak else ""))
                bar.update(1)
            if staged != self.path and self.write_path is None:
                publish(staged, self.path)
        finally:
            bar.close()
        return self.path


def preset_config(name: str) -> dict[str, str]:
    if name not in reference.PRESETS:
        raise UserError(f"unknown preset '{name}' (choose from {', '.join(reference.PRESETS)})")
    return reference.PRESETS[name]
