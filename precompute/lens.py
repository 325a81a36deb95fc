"""The lens stage: tuned- and logit-lens KL per hidden state for both models of a pair.

Text: the toy corpus (Python's documentation) by default, a text file, or ``hf:<dataset>``
(WikiText, as the paper used, when online). Paragraphs are split once: the first part
trains the tuned lens, the rest evaluates it, so training and evaluation text are
disjoint. Trained lens weights are saved beside the cache with a fingerprint of the
unembedding they belong to, and reused on a rerun when it matches.

Training budget: each optimiser step sees ``tokens_per_step`` tokens, gathered by gradient
accumulation over micro-batches of ``batch_size`` x ``seq_len`` tokens (so memory stays that
of one micro-batch). The default is 2**18 = 262,144 tokens per step on a CUDA device (about
the tuned-lens library's budget; the paper's authors used 131,072) and 8,192 on a CPU (or any
other device), where the larger budget would take hours. The training text is, by default,
steps x tokens_per_step tokens, as far as the lens text allows; a shorter text is cycled.
Each model's budget is resolved once, with the sequence length capped at its context
(:func:`model_budget`); that budget trains the lens, is saved in the lens's JSON sidecar and
is what the cache records for the stage, per model.
"""

from __future__ import annotations

import hashlib
import math
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
from tqdm.auto import tqdm

from precompute.options import internal, option
from tying.errors import UserError, first_line
from tying.lens import LIBRARY_STEPS, LensBudget

EVAL_FRACTION = 0.2

CUDA_TOKENS_PER_STEP = 2**18
"""Default tokens per optimiser step on a CUDA device (262,144; about the tuned-lens library's)."""

CPU_TOKENS_PER_STEP = 8_192
"""Default tokens per optimiser step on a CPU or any other non-CUDA device."""

LONG_TRAINING_SECONDS = 2 * 3600
"""A tuned lens estimated to train longer than this gets the advice to train it on a GPU."""

ASSUMED_GPU_FLOPS = 100e12
"""Sustained FLOP/s assumed for one CUDA GPU in the advice's estimate (bf16, an A100/H100 class
card at a fraction of its peak); the estimate on the machine itself is timed, never assumed."""


@dataclass
class LensOptions:
    """Options of the lens stage (CLI: --lens-*).

    tokens_per_step: tokens per optimiser step, reached by gradient accumulation over
        micro-batches of batch_size x seq_len tokens; None = the device's default, 262,144
        (2**18) on a CUDA device and 8,192 on a CPU.
    train_tokens: tokens of training text; None = steps x tokens_per_step, as far as the lens
        text allows (training cycles through a shorter text).
    See :func:`resolve_budget`.
    """

    text: str = option("python-docs", help="lens text: `python-docs` (the offline corpus), a text file, or "
                       "`hf:<dataset>` such as `hf:wikitext` (WikiText, as the paper)")
    steps: int = option(LIBRARY_STEPS, help="tuned-lens optimiser steps per model")
    batch_size: int = option(8, help="sequences per lens micro-batch (bounds memory)")
    seq_len: int = option(128, help="tokens per lens sequence, capped at the model's context")
    tokens_per_step: int | None = option(
        None, shown=f"{CUDA_TOKENS_PER_STEP} on a CUDA GPU, {CPU_TOKENS_PER_STEP} on a CPU",
        help="tokens per tuned-lens optimiser step, by gradient accumulation over ceil(tokens / (batch size x seq "
        "len)) micro-batches; the tuned-lens library trains with about 2^18, the paper's authors with 131,072")
    train_tokens: int | None = option(None, shown="steps x tokens per step", help="tokens of lens training text, "
                                      "as far as the lens text allows (a shorter text is cycled)")
    eval_tokens: int = option(65_536, help="tokens of lens evaluation text (disjoint from training)")
    from_dir: str | None = option(None, flag="--lens-from", help="use the tuned lenses in this folder, trained by the "
                                  "tuned-lens library or written by `export-lens` (`<dir>/tied`, `<dir>/untied`, "
                                  "each config.json + params.pt), instead of training them")
    samples: int = internal(3)  # sample texts for prediction trajectories
    prompts: tuple[str, ...] = internal(())  # texts traced before the samples (the first is sample 0)
    top_k: int = internal(10)  # predictions stored per cell of a trajectory (the Lens page's top-10)
    max_chars: int = internal(1_200_000)

    def __post_init__(self) -> None:
        if self.from_dir:  # checked before any stage runs; whether it fits the models, at the lens stage
            from precompute.lens_io import ROLES, lens_folder

            folders = [f for f in (lens_folder(self.from_dir, role) for role in ROLES) if f is not None]
            if not folders:
                raise UserError(f"--lens-from {self.from_dir}: not a tuned-lens folder (no config.json and params.pt "
                                "in it or in its tied/ and untied/)")
            from tying.lens.interop import check_folder  # torch: only when a lens folder is given

            for folder in folders:  # types, dtypes, shapes, NaN and Inf, before any stage writes anything
                try:
                    check_folder(folder)
                except UserError as exc:
                    raise UserError(f"--lens-from: {first_line(exc)}") from None

    def params(self) -> dict:
        out = dict(self.__dict__)
        if not self.prompts:  # the hash of every lens written before prompts existed
            del out["prompts"]
        if not self.from_dir:  # likewise before --lens-from
            del out["from_dir"]
        else:
            out["prompts"] = list(self.prompts)
        return out

    def training_params(self) -> dict:
        """:meth:`params` without the options that only read a trained lens (:data:`READING_ONLY`)."""
        return {k: v for k, v in self.params().items() if k not in READING_ONLY}


READING_ONLY = ("top_k", "samples", "prompts")
"""Lens options that change what is read through a trained lens (the trajectories), never its training:
a lens saved under other values of them is reused (:meth:`LensSetup.trained_alike`)."""


def _device_type(device) -> str:
    kind = getattr(device, "type", None)
    return str(kind if kind is not None else device or "cpu").split(":")[0]


def resolve_budget(opts: LensOptions, device, seq_len: int | None = None) -> tuple[int, int, int]:
    """(tokens_per_step, accumulate, train_tokens) of the lens stage on ``device``.

    device: a torch.device or its name ("cuda", "cuda:1", "cpu", ...). seq_len: the sequence
    length actually used (``opts.seq_len`` capped at the model's context; default
    ``opts.seq_len``). The target tokens per step is ``opts.tokens_per_step``, or
    CUDA_TOKENS_PER_STEP (262,144) on a CUDA device and CPU_TOKENS_PER_STEP (8,192) on any
    other. accumulate = ceil(target / (batch_size x seq_len)), at least 1, micro-batches per
    step; the returned tokens_per_step is the effective accumulate x batch_size x seq_len
    (the target when it divides evenly). train_tokens is ``opts.train_tokens``, or
    steps x tokens_per_step.
    """
    seq = int(opts.seq_len if seq_len is None else seq_len)
    for name, value in (("steps", opts.steps), ("batch_size", opts.batch_size), ("seq_len", seq)):
        if int(value) < 1:
            raise UserError(f"lens {name} must be positive, got {value}")
    target = opts.tokens_per_step
    if target is None:
        target = CUDA_TOKENS_PER_STEP if _device_type(device) == "cuda" else CPU_TOKENS_PER_STEP
    if int(target) < 1:
        raise UserError(f"lens tokens per step must be positive, got {target}")
    micro = int(opts.batch_size) * seq
    accumulate = max(1, math.ceil(int(target) / micro))
    tokens_per_step = accumulate * micro
    if opts.train_tokens is not None and int(opts.train_tokens) < 1:
        raise UserError(f"lens train tokens must be positive, got {opts.train_tokens}")
    train_tokens = int(opts.train_tokens) if opts.train_tokens is not None else int(opts.steps) * tokens_per_step
    return tokens_per_step, accumulate, train_tokens


def lens_text(spec: str, max_chars: int) -> tuple[list[str], list[str]]:
    """Training and evaluation paragraphs (disjoint) of the lens text."""
    from tying.loading.corpus import load_corpus

    text = load_corpus(spec, max_chars)
    paras = [p for p in text.split("\n\n") if p.strip()]
    if len(paras) < 5:
        raise UserError("no text to evaluate the lens on: the lens text has fewer than 5 paragraphs")
    cut = max(1, int(len(paras) * (1 - EVAL_FRACTION)))
    return paras[:cut], paras[cut:]


def model_budget(opts: LensOptions, device, context: int | None) -> LensBudget:
    """The budget one model's tuned lens trains with: :func:`resolve_budget` with the sequence
    length capped at the model's ``context`` (its max_position_embeddings; None: no cap): what
    training uses, and so what the cache records."""
    seq = int(opts.seq_len) if not context else min(int(opts.seq_len), int(context))
    tokens_per_step, accumulate, train_tokens = resolve_budget(opts, device, seq)
    return LensBudget(steps=int(opts.steps), tokens_per_step=tokens_per_step, accumulate=accumulate,
                      batch_size=int(opts.batch_size), seq_len=seq, train_tokens=train_tokens)


def _duration(seconds: float) -> str:
    """'45 s', '12 min', '3.4 h': a duration as a person reads it."""
    if seconds < 1:
        return "under a second"
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def estimate_text(role: str, est, budget: LensBudget, device) -> str:
    """One line before a tuned lens trains: its estimated time, from what (``est``: a
    :class:`~tying.lens.estimate.LensEstimate`)."""
    return (f"{role}: training the tuned lens should take about {_duration(est.seconds)} on {_device_type(device)}: "
            f"{budget.steps:,} steps x {budget.tokens_per_step:,} tokens, {est.micro_batches:,} micro-batches of "
            f"{budget.batch_size} x {budget.seq_len} at "
            + (f"{est.micro_seconds:.3g} s" if est.micro_seconds < 90 else _duration(est.micro_seconds))
            + f" each (timed on one); about {_si(est.flops_per_token)}FLOP a token for a {_si(est.n_params)}-parameter "
            "model and its lens")


def _si(x: float) -> str:
    """'1.18 G', '39.8 k', '512 ': a count with an SI prefix (and a space before the unit)."""
    for value, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if x >= value:
            return f"{x / value:.3g} {prefix}"
    return f"{x:.3g} "


def long_training_advice(est, opts: LensOptions, budget: LensBudget, device, gpu_command: str | None,
                         cache: str | None = None) -> str | None:
    """What to say when ``est`` (a :class:`~tying.lens.estimate.LensEstimate`) is over
    LONG_TRAINING_SECONDS: None when it is not. On a CPU: how to train the lens on a machine
    with a GPU into the same cache (``gpu_command``: the ``precompute lens`` command to run
    there; ``cache``: the cache file to carry there and back), with an estimate at
    ASSUMED_GPU_FLOPS for the budget a GPU gets by default. On a GPU already: which options
    shorten it."""
    if est.seconds <= LONG_TRAINING_SECONDS:
        return None
    head = f"That is over {LONG_TRAINING_SECONDS / 3600:.0f} hours"
    shorter = "fewer --lens-steps or a smaller --lens-tokens-per-step shorten it (and lower the lens's quality)"
    if _device_type(device) == "cuda" or not gpu_command:
        return f"{head}; {shorter}."
    gpu_tokens, _, _ = resolve_budget(opts, "cuda", budget.seq_len)
    gpu_seconds = int(budget.steps) * gpu_tokens * est.flops_per_token / ASSUMED_GPU_FLOPS
    carry = f"{cache} and its lens folder" if cache else "the cache"
    return (f"{head} on this {_device_type(device)}. The lens stage can run alone on a machine with a CUDA GPU, into "
            f"the same cache: stop here (Ctrl-C; the stages finished so far stay in the cache), copy {carry} there, "
            f"run\n    {gpu_command}\nand copy them back (on a GPU the lens trains with {gpu_tokens:,} tokens a step "
            f"unless --lens-tokens-per-step says otherwise: about {_duration(gpu_seconds)} a model at an assumed "
            f"{ASSUMED_GPU_FLOPS / 1e12:.0f} TFLOP/s). Here, `--skip lens` leaves the lens out; {shorter}.")


@dataclass(frozen=True)
class LensText:
    """The lens text, split once into training and evaluation paragraphs (disjoint)."""

    train: list[str]
    evaluate: list[str]

    @classmethod
    def load(cls, opts: LensOptions) -> LensText:
        return cls(*lens_text(opts.text, opts.max_chars))

    def samples(self, opts: LensOptions) -> list[str]:
        """The texts traced into prediction trajectories: the prompts, then the first evaluation paragraphs."""
        return [*opts.prompts, *self.evaluate[: opts.samples]]


@dataclass
class LensModel:
    """One model under the lens: the model on its device, its tokenizer, its lens parts (final norm,
    unembedding) and the fingerprint of its unembedding (what a saved lens is checked against)."""

    role: str
    folder: str
    model: Any
    tok: Any
    parts: Any
    fingerprint: str

    @classmethod
    def load(cls, role: str, folder: str, device, trust_remote_code: bool = False) -> LensModel:
        from tying.lens.files import unembedding_fingerprint
        from tying.lens.parts import find_lens_parts
        from tying.loading.causal_lm import load_causal_lm

        model, tok = load_causal_lm(folder, device, trust_remote_code=trust_remote_code)
        parts = find_lens_parts(model)
        return cls(role, str(folder), model, tok, parts, unembedding_fingerprint(parts))

    @property
    def context(self) -> int | None:
        return getattr(self.model.config, "max_position_embeddings", None)

    def batches(self, paragraphs: list[str], seq_len: int, batch_size: int, max_tokens: int) -> list:
        from tying.lens.batches import text_batches

        return text_batches(self.tok, paragraphs, seq_len=seq_len, batch_size=batch_size, max_tokens=max_tokens)


@dataclass(frozen=True)
class LensSetup:
    """Where and how the lens stage trains and saves its lenses: the options, the folder of the
    cache's translators (tying.layout.lens_dir), the device, where its lines go (``say``) and what
    the advice for a long training names (``gpu_command``, ``cache``)."""

    opts: LensOptions
    folder: Path
    device: Any
    say: Callable[[str], None] = lambda message: tqdm.write(message, file=sys.stderr)
    gpu_command: str | None = None
    cache: str | None = None

    def lens_path(self, lm: LensModel, budget: LensBudget, text: LensText) -> Path:
        """The file of a model's lens: named by the options, the text and the budget it trains with."""
        key = hashlib.sha256(repr((self.opts.params(), len(text.train), budget.to_dict())).encode()).hexdigest()[:12]
        return self.folder / f"{lm.role}-{key}.safetensors"

    def tuned_lens(self, lm: LensModel, budget: LensBudget, text: LensText,
                   progress: Callable[[str], None]) -> tuple[Any, pd.DataFrame, LensBudget]:
        """A model's tuned lens: read from ``--lens-from``, reused from its file, or trained (an
        estimate said first); with its training curve and the budget as it ran (text_tokens,
        lens_from)."""
        from tying.lens.files import load_lens, read_lens_meta, save_lens

        opts = self.opts
        train = [] if opts.from_dir else lm.batches(text.train, budget.seq_len, opts.batch_size, budget.train_tokens)
        budget = replace(budget, text_tokens=int(sum(b.numel() for b in train)))
        path = self.lens_path(lm, budget, text)
        meta = {"role": lm.role, "model": lm.folder, "options": opts.params()}
        if opts.from_dir:  # a lens the tuned-lens library trained (or export-lens wrote): read, not trained
            from precompute.lens_io import lens_from

            lens, source = lens_from(opts.from_dir, lm.role, lm.parts, f"the {lm.role} model ({lm.folder})")
            budget = replace(budget, lens_from=str(source))
            curve = pd.DataFrame({"step": [], "layer": [], "kl_bits": []})
            save_lens(lens, path, lm.fingerprint, meta | {"budget": budget.to_dict(), "curve": curve.to_dict("list")})
            progress(f"{lm.role}: using the tuned lens in {source}")
            return lens.to(self.device), curve, budget
        path = path if path.exists() else self.trained_alike(lm, budget) or path
        lens = load_lens(path, lm.fingerprint, device=self.device) if path.exists() else None
        if lens is not None:
            progress(f"{lm.role}: reusing the tuned lens in {path.name} (same unembedding)")
            curve = pd.DataFrame(read_lens_meta(path).get("meta", {}).get("curve") or
                                 {"step": [], "layer": [], "kl_bits": []})
            return lens, curve, budget
        lens, curve = self.train(lm, budget, train, progress)
        save_lens(lens, path, lm.fingerprint, meta | {"budget": budget.to_dict(), "tokens_seen": budget.tokens_seen,
                                                      "curve": curve.to_dict("list")})
        # read back as saved (a large lens in float16): the cache's KL is that of the lens on disk
        return load_lens(path, lm.fingerprint, device=self.device), curve, budget

    def trained_alike(self, lm: LensModel, budget: LensBudget) -> Path | None:
        """A lens of ``lm``'s role in the folder saved with the same training options and budget,
        whatever its :data:`READING_ONLY` options were (so a larger ``top_k`` retrains nothing); None
        when there is none. Its fingerprint is checked when it loads."""
        from tying.lens.files import read_lens_meta

        want = (self.opts.training_params(), budget.to_dict())
        for f in sorted(self.folder.glob(f"{lm.role}-*.safetensors")):
            try:
                meta = read_lens_meta(f).get("meta") or {}
            except ValueError:
                continue
            options = {k: v for k, v in (meta.get("options") or {}).items() if k not in READING_ONLY}
            if (options, meta.get("budget")) == want:
                return f
        return None

    def train(self, lm: LensModel, budget: LensBudget, train: list, progress: Callable[[str], None]):
        """Train a model's tuned lens with ``budget`` on ``train``: the estimate (and, when long, the
        advice) said first, a progress bar of its steps, ``progress`` messages with the time left."""
        from tying.lens.estimate import estimate_training
        from tying.lens.train import train_tuned_lens

        progress(f"{lm.role}: timing one micro-batch for an estimate")
        est = estimate_training(lm.model, train[0], budget, parts=lm.parts, device=self.device)
        self.say(estimate_text(lm.role, est, budget, self.device))
        advice = long_training_advice(est, self.opts, budget, self.device, self.gpu_command, self.cache)
        if advice:
            self.say(advice)
        bar = tqdm(total=budget.steps, desc=f"{lm.role} tuned lens", unit="step", file=sys.stderr, disable=None,
                   leave=False)
        started = time.perf_counter()

        def report(step, steps, loss):
            bar.update(1)
            if step % 10 == 0 or step == steps:
                left = (time.perf_counter() - started) / step * (steps - step)
                progress(f"{lm.role}: tuned lens step {step}/{steps}, KL {loss:.2f}, about {_duration(left)} left")

        progress(f"{lm.role}: training the tuned lens, {budget.steps} steps x {budget.tokens_per_step:,} tokens "
                 f"({budget.accumulate} micro-batch{'es' if budget.accumulate > 1 else ''} of {budget.batch_size} x "
                 f"{budget.seq_len}) on {budget.text_tokens:,} tokens of text")
        try:
            return train_tuned_lens(lm.model, train, steps=budget.steps, device=self.device, parts=lm.parts,
                                    progress=report, accumulate=budget.accumulate)
        finally:
            bar.close()

    def readings(self, lm: LensModel, lens, budget: LensBudget, text: LensText) -> tuple[pd.DataFrame, pd.DataFrame]:
        """A model read through its tuned lens and the logit lens: the KL per hidden state on the
        evaluation text, and the prediction trajectories of the sample texts."""
        from tying.lens.evaluate import evaluate_lens, prediction_trajectory
        from tying.lens.lenses import LogitLens

        opts, lenses = self.opts, [lens, LogitLens()]
        evals = lm.batches(text.evaluate, budget.seq_len, opts.batch_size, opts.eval_tokens)
        kl = evaluate_lens(lm.model, evals, lenses, device=self.device, parts=lm.parts).assign(model=lm.role)
        trajs = [prediction_trajectory(lm.model, lm.tok, t, lenses, top_k=opts.top_k, device=self.device,
                                       parts=lm.parts).assign(model=lm.role, sample=i)
                 for i, t in enumerate(text.samples(opts))]
        return kl, pd.concat(trajs, ignore_index=True)


def read_models(setup: LensSetup, models: dict[str, str], progress: Callable[[str], None] = lambda m: None,
                trust_remote_code: bool = False) -> tuple[dict[str, pd.DataFrame], dict[str, dict]]:
    """Tables lens_kl, lens_curve and lens_trajectory of ``{role: model folder}``, and each model's
    budget as it trained (``{role: budget | device}``): the ingredients above, one model at a time
    (a model is released before the next loads)."""
    text = LensText.load(setup.opts)
    kl, curves, trajs, ran = [], [], [], {}
    for role, folder in models.items():
        progress(f"{role}: loading the model")
        lm = LensModel.load(role, folder, setup.device, trust_remote_code)
        budget = model_budget(setup.opts, setup.device, lm.context)
        lens, curve, budget = setup.tuned_lens(lm, budget, text, progress)
        progress(f"{role}: evaluating")
        k, t = setup.readings(lm, lens, budget, text)
        kl.append(k)
        trajs.append(t)
        curves.append(curve.assign(model=role))
        ran[role] = budget.to_dict() | {"device": _device_type(setup.device)}
        del lm
    lens_kl = pd.concat(kl, ignore_index=True)
    if "lens" not in lens_kl.columns:
        raise UserError("lens evaluation returned no lens column")
    return {"lens_kl": lens_kl, "lens_curve": pd.concat(curves, ignore_index=True),
            "lens_trajectory": pd.concat(trajs, ignore_index=True)}, ran


def lens_gpu_command(cfg, name: str) -> str:
    """The ``precompute lens`` command that trains a pair run's lenses (``cfg``: its PairConfig) on a CUDA GPU into the same
    cache: the same models, revisions, matching and --text (the load stage must find itself
    finished, or it would start the cache afresh), the same name and cache folder, every lens
    option set away from its default, and ``--device cuda``."""
    from precompute.options import specs

    argv = ["--preset", cfg.preset] if cfg.preset else ["--tied", cfg.tied, *(["--untied", cfg.untied] if cfg.untied
                                                                               else [])]
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
