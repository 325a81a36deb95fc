"""Train tied and untied twins on the same tokens, logging the gradient provenance of every step.

:func:`train_twins` trains each variant with one optimiser and schedule from the initial weights
(:func:`build_twins`) and batches (:func:`batch_offsets`) of its own seed (:func:`variant_seeds`:
the untied twin and ``tied_rerun`` independent of T, ``tied_scaled`` an intervention on T's run;
``shared_start=True``, the control, gives every variant T's start and batches). Each returns a
:class:`TrainResult`: the model, a per-step log of loss and gradient norms, log-spaced snapshots of
its matrices and its held-out loss. The defaults (4 layers, d=128, context 64, batches of 16, 250
steps) train three variants in about 2.5 minutes on a 2-core CPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd
import torch
import torch.nn.functional as F

from tying.analysis.align import rowwise_cosine
from tying.device import as_device
from tying.toylab.model import build_twins, check_variant, embedding_matrices, variant_seeds
from tying.toylab.optim import OPTIMIZERS, lr_factor, make_optimizer
from tying.toylab.provenance import GradientProvenance, check_scale

LOG_COLUMNS = ("step", "loss", "lr", "grad_input_norm", "grad_output_norm", "grad_total_norm", "output_share",
               "grad_input_proxy_norm")
"""Columns of :attr:`TrainResult.log`, one row per optimiser step."""

EVOLUTION_COLUMNS = ("step", "matrix", "cos_init", "cos_prev")
"""Columns of :func:`embedding_evolution`."""

DEFAULT_VARIANTS = ("tied", "untied", "tied_scaled")  # what train_twins trains when not told

DEFAULT_CHECKPOINTS = 12
"""Snapshots of the embedding matrices per run when ``checkpoint_steps`` is None."""


@dataclass
class TrainResult:
    """One trained variant.

    Attributes:
        variant: "tied", "untied" or "tied_scaled".
        model: the trained ``LlamaForCausalLM`` (on the training device, eval mode).
        log: DataFrame with :data:`LOG_COLUMNS`; ``step`` counts optimiser updates from 1,
            ``loss`` is the training loss of that step's batch (before the update),
            ``grad_input_norm`` the input-side gradient as applied (after the factor),
            ``grad_output_norm`` the output-side one, ``grad_total_norm`` the norm of the
            whole embedding gradient, ``output_share`` = out / (in + out),
            ``grad_input_proxy_norm`` the authors' input-side proxy (norm of the gradient
            w.r.t. the embedding output over all positions, after the factor).
        checkpoints: ``{step: (input, output)}``, float32 arrays of shape (n_vocab, d);
            step 0 is the initialisation; a tied variant's pair is one array twice.
        eval_loss: mean cross-entropy (nats per token) on the held-out tokens after training.
        input_grad_scale: the factor on the input-side gradient (1 unless ``tied_scaled``).
        seconds: wall time of the training loop.
        settings: every hyperparameter of the run.
    """

    variant: str
    model: torch.nn.Module
    log: pd.DataFrame
    checkpoints: dict[int, tuple[np.ndarray, np.ndarray]]
    eval_loss: float
    input_grad_scale: float
    seconds: float
    settings: dict = field(default_factory=dict)

    @property
    def tied(self) -> bool:
        return check_variant(self.variant)


def log_spaced_steps(total: int, n: int) -> list[int]:
    """``n`` distinct steps from 0 to ``total``, both included, spaced evenly in log(step).

    Where the log spacing would put two steps on one integer (early on), the later ones
    move up by one, so the result always has exactly ``n`` sorted steps.

    Raises:
        ValueError: ``n`` < 2 or ``total`` < ``n - 1`` (too few steps for that many snapshots).
    """
    total, n = int(total), int(n)
    if n < 2:
        raise ValueError(f"at least 2 checkpoints are needed (the start and the end), got {n}")
    if total < n - 1:
        raise ValueError(f"{total} training steps are too few for {n} checkpoints (need at least {n - 1})")
    targets = np.geomspace(1, total, n - 1)
    steps = [0]
    for i, target in enumerate(targets):
        remaining = len(targets) - 1 - i  # steps still to place after this one
        step = max(int(round(target)), steps[-1] + 1)
        steps.append(min(step, total - remaining))
    return steps


def batch_offsets(n_tokens: int, steps: int, batch_size: int, context: int, seed: int) -> np.ndarray:
    """Start positions of every training sequence: int64 array of shape (steps, batch_size).

    Sequence ``j`` of step ``t`` is ``tokens[o : o + context + 1]`` with ``o = out[t, j]``
    (inputs are its first ``context`` tokens, targets its last ``context``). One seeded
    generator draws them all, so every variant sees the same batches in the same order.
    """
    high = n_tokens - context  # o + context + 1 <= n_tokens
    if high < 1:
        raise ValueError(f"{n_tokens} training tokens are too few for a context of {context}")
    return np.random.default_rng(seed).integers(0, high, size=(steps, batch_size), dtype=np.int64)


def split_eval(tokens: np.ndarray, context: int, eval_fraction: float = 0.05) -> tuple[np.ndarray, np.ndarray]:
    """(training tokens, held-out tokens): the last ``eval_fraction`` of ``tokens`` (at least one
    window of ``context + 1``) is held out, the rest trains. :func:`train_twins` splits this way."""
    n_eval = max(context + 1, int(len(tokens) * eval_fraction))
    return tokens[:-n_eval], tokens[-n_eval:]


def eval_span(n_tokens: int, context: int, max_windows: int = 256) -> tuple[int, int]:
    """The token positions ``[start, stop)`` that :func:`evaluate_loss` reads from a held-out
    sequence of ``n_tokens``: its first ``max_windows`` windows of ``context + 1`` (stride ``context``)."""
    n = min(max_windows, (n_tokens - 1) // context)
    return 0, (n * context + 1 if n > 0 else 0)


def epoch_offsets(n_tokens: int, steps: int, batch_size: int, context: int, seed: int) -> tuple[np.ndarray, float]:
    """Start positions that read the text in epochs: ``(offsets of shape (steps, batch_size), epochs)``.

    The tokens are cut into non-overlapping windows of ``context + 1`` at stride ``context``
    (every token is a target once per epoch); each epoch visits every window once in an order
    shuffled by ``seed``; no window is seen twice before every window has been seen once.
    ``epochs`` = sequences drawn / windows in the text (1.5: the text was read one and a half
    times). Same seed, same order, so every arm of a cell sees the same batches.
    """
    n_windows = (n_tokens - 1) // context
    if n_windows < 1:
        raise ValueError(f"{n_tokens} training tokens are too few for a context of {context}")
    need = steps * batch_size
    rng = np.random.default_rng(seed)
    starts = np.arange(n_windows, dtype=np.int64) * context
    order = np.concatenate([rng.permutation(starts) for _ in range(-(-need // n_windows))])[:need]
    return order.reshape(steps, batch_size), need / n_windows


def _snapshot(model) -> tuple[np.ndarray, np.ndarray]:
    inp, out = embedding_matrices(model)
    a = inp.detach().to("cpu", torch.float32).numpy().copy()
    return (a, a) if inp is out else (a, out.detach().to("cpu", torch.float32).numpy().copy())


@torch.no_grad()
def evaluate_loss(model, tokens: np.ndarray, context: int, batch_size: int = 32, max_windows: int = 256,
                  device=None) -> float:
    """Mean next-token cross-entropy (nats) over non-overlapping windows of ``context + 1`` tokens.

    Uses the first ``max_windows`` windows of ``tokens``; NaN when there is not even one.
    """
    device = device or next(model.parameters()).device
    n = min(max_windows, (len(tokens) - 1) // context)
    if n < 1:
        return float("nan")
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    for start in range(0, n, batch_size):
        rows = np.arange(start, min(n, start + batch_size)) * context
        idx = rows[:, None] + np.arange(context + 1)[None, :]
        chunk = torch.from_numpy(tokens[idx].astype(np.int64)).to(device)
        logits = model(input_ids=chunk[:, :-1]).logits
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), chunk[:, 1:].reshape(-1), reduction="sum")
        total += loss.item()
        count += chunk[:, 1:].numel()
    model.train(was_training)
    return total / count


def _train_one(model, name: str, scale: float, train_tokens: np.ndarray, offsets: np.ndarray, context: int,
               snap_steps: Sequence[int], opt: dict, progress, device, surgery=None) -> tuple[pd.DataFrame, dict, float]:
    """Train one variant in place; return its log, its snapshots and the loop's wall time. A
    ``surgery`` (:class:`tying.toylab.surgery.Surgery`) edits the tied matrix's output-side
    gradient after each backward pass; the log then adds ``grad_output_applied_norm``. A surgery that
    ``balances_update`` (:class:`tying.toylab.optim.UpdateBalance`) updates the tied matrix itself;
    the log adds the two update norms it applied (``update_input_norm``, ``update_output_norm``)."""
    steps = len(offsets)
    weight = model.get_input_embeddings().weight
    balance = getattr(surgery, "balances_update", False)
    optimizer = make_optimizer(model, embedding_matrices(model), opt["lr"], opt["weight_decay"], opt["betas"],
                               opt.get("optimizer", "adamw"), opt.get("momentum", 0.9), weight if balance else None)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda t: lr_factor(t + 1, steps, opt["warmup_steps"], opt["min_lr_ratio"]))
    window = np.arange(context + 1)[None, :]
    snap_steps = set(snap_steps)
    checkpoints = {0: _snapshot(model)}
    rows, applied, updates = [], [], []
    start = time.perf_counter()
    with GradientProvenance(model, input_grad_scale=scale) as prov:
        for step in range(1, steps + 1):
            chunk = torch.from_numpy(train_tokens[offsets[step - 1][:, None] + window].astype(np.int64))
            chunk = chunk.to(device, non_blocking=True)
            logits = model(input_ids=chunk[:, :-1]).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), chunk[:, 1:].reshape(-1))
            optimizer.zero_grad(set_to_none=True)
            prov.reset()
            loss.backward()
            if surgery is not None:
                applied.append(surgery.apply(weight, prov.g_in * prov.scale, prov.g_out, chunk[:, :-1]))
            total = torch.nn.utils.clip_grad_norm_(model.parameters(), opt["grad_clip"]) if opt["grad_clip"] else None
            lr = optimizer.param_groups[0]["lr"]
            optimizer.step()
            if balance:  # the clipping's factor, as torch computes it
                updates.append(surgery.step(weight, lr, 1.0 if total is None else
                                            min(1.0, opt["grad_clip"] / (float(total) + 1e-6))))
            schedule.step()
            norms = prov.norms()
            value = loss.item()
            rows.append((step, value, lr, norms.input, norms.output, norms.total, norms.output_share,
                         norms.input_proxy))
            if step in snap_steps:
                checkpoints[step] = _snapshot(model)
            if progress is not None:
                progress(name, step, steps, value)
    seconds = time.perf_counter() - start
    log = pd.DataFrame(rows, columns=list(LOG_COLUMNS))
    if surgery is not None:
        log["grad_output_applied_norm"] = applied
    if updates:
        log["update_input_norm"], log["update_output_norm"] = zip(*updates)
    return log, checkpoints, seconds


def train_twins(
    tokens: np.ndarray,
    *,
    variants: Sequence[str] = DEFAULT_VARIANTS,
    input_grad_scale: float = 5.0,
    vocab_size: int | None = None,
    d_model: int = 128,
    n_layers: int = 4,
    n_heads: int = 4,
    d_ff: int | None = None,
    steps: int = 250,
    batch_size: int = 16,
    context: int = 64,
    lr: float = 3e-3,
    warmup_steps: int | None = None,
    min_lr_ratio: float = 0.1,
    weight_decay: float = 0.1,
    betas: tuple[float, float] = (0.9, 0.95),
    grad_clip: float | None = 1.0,
    eval_fraction: float = 0.05,
    seed: int = 0,
    checkpoint_steps: int | Sequence[int] | None = None,
    progress: Callable[[str, int, int, float], None] | None = None,
    device=None,
    num_threads: int | None = None,
    order: str = "random",
    optimizer: str = "adamw",
    momentum: float = 0.9,
    surgery=None,
    shared_start: bool = False,
    seeds: dict[str, int] | None = None,
    draw_d_ff: int | None = None,
) -> dict[str, TrainResult]:
    """Train each variant from the initial weights and on the batches of its own seed.

    Args:
        tokens: int array of shape (n_tokens,), the encoded corpus. The last
            ``eval_fraction`` of it is held out for :attr:`TrainResult.eval_loss`.
        variants: names from ``tying.toylab.model.VARIANTS``.
        input_grad_scale: factor on the input-side gradient of ``tied_scaled`` (> 0).
        vocab_size: rows of the embedding matrices; default ``tokens.max() + 1`` (pass
            ``len(tokenizer)`` so that tokens absent from the corpus still get a row).
        d_model, n_layers, n_heads, d_ff: model size (see :func:`toy_config`).
        steps: optimiser updates per variant.
        batch_size, context: sequences per batch and tokens per sequence.
        lr: peak learning rate of AdamW; linear warm-up over ``warmup_steps`` (default
            5% of ``steps``), then cosine decay to ``min_lr_ratio * lr``.
        weight_decay: decoupled weight decay on hidden weight matrices (not on the
            embedding matrices or norm weights, so rows of absent tokens are left alone).
        betas: AdamW's betas.
        grad_clip: clip the global gradient norm to this (None: no clipping).
        eval_fraction: share of ``tokens`` held out (taken from the end).
        seed, shared_start: each variant's start and batch order come from
            ``variant_seeds(seed, variants, shared_start)``.
        seeds: ``{variant: seed}`` overriding those (``tied_rerun`` on T's seed reproduces T).
        draw_d_ff: start from the draw of a model of this feed-forward width, widened
            (:func:`tying.toylab.model.widen_feed_forward`; the sweep's matched arm).
        checkpoint_steps: number of log-spaced snapshots (default 12), or the steps
            themselves (0 and ``steps`` always added).
        progress: called as ``progress(variant, step, steps, loss)`` after every update.
        device: torch device; default the GPU when present, else the CPU.
        num_threads: CPU threads for torch while training (restored after; None: torch's).
        order: "random" (each sequence starts at a uniformly drawn position,
            :func:`batch_offsets`) or "epochs" (non-overlapping windows, every one once per
            epoch, :func:`epoch_offsets`; ``settings["epochs"]`` says how many were read).
        optimizer, momentum: ``adamw`` (``betas``, ``weight_decay``) or ``sgd`` (``momentum``,
            no weight decay): :data:`OPTIMIZERS`.
        surgery: a :class:`tying.toylab.surgery.Surgery` applied to the tied variants' output-side
            gradient at every step (None: none; untied variants never get one).

    Returns:
        ``{variant: TrainResult}`` in the order of ``variants``.

    Raises:
        ValueError: an unknown variant, a bad factor, too few tokens for the context, or
            too few steps for the snapshots asked.
    """
    tokens = np.asarray(tokens)
    if tokens.ndim != 1 or not np.issubdtype(tokens.dtype, np.integer) or len(tokens) == 0:
        raise ValueError(f"tokens must be a non-empty 1-d integer array, got {tokens.dtype} of shape {tokens.shape}")
    if not variants:
        raise ValueError("no variants to train")
    for name in variants:
        check_variant(name)
    if steps < 1 or batch_size < 1 or context < 1:
        raise ValueError("steps, batch size and context must be positive")
    scale = check_scale(input_grad_scale)
    vocab_size = int(vocab_size or int(tokens.max()) + 1)
    if int(tokens.max()) >= vocab_size or int(tokens.min()) < 0:
        raise ValueError(f"token ids must lie in [0, {vocab_size}), got {tokens.min()}..{tokens.max()}")
    if optimizer not in OPTIMIZERS:
        raise ValueError(f"optimizer must be one of {', '.join(OPTIMIZERS)}, got {optimizer!r}")
    if not 0 < eval_fraction < 1:
        raise ValueError(f"eval_fraction must lie in (0, 1), got {eval_fraction}")
    train_tokens, eval_tokens = split_eval(tokens, context, eval_fraction)
    if order not in ("random", "epochs"):
        raise ValueError(f"order must be 'random' or 'epochs', got {order!r}")
    own = {**variant_seeds(seed, variants, shared_start), **{k: int(v) for k, v in (seeds or {}).items()}}
    orders = {s: ((batch_offsets(len(train_tokens), steps, batch_size, context, s), None) if order == "random" else
                  epoch_offsets(len(train_tokens), steps, batch_size, context, s)) for s in set(own.values())}
    if checkpoint_steps is None or isinstance(checkpoint_steps, (int, np.integer)):
        snap_steps = log_spaced_steps(steps, DEFAULT_CHECKPOINTS if checkpoint_steps is None else checkpoint_steps)
    else:
        snap_steps = sorted({int(s) for s in checkpoint_steps} | {0, steps})
        if snap_steps[0] < 0 or snap_steps[-1] > steps:
            raise ValueError(f"checkpoint steps must lie in [0, {steps}], got {snap_steps[0]}..{snap_steps[-1]}")
    device = as_device(device)
    model_kwargs = dict(vocab_size=vocab_size, d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff,
                        context=context)
    opt = dict(lr=lr, warmup_steps=max(1, round(0.05 * steps)) if warmup_steps is None else int(warmup_steps),
               min_lr_ratio=min_lr_ratio, weight_decay=weight_decay, betas=tuple(betas), grad_clip=grad_clip,
               optimizer=optimizer, momentum=momentum)
    settings = dict(model_kwargs, **opt, steps=steps, batch_size=batch_size, eval_fraction=eval_fraction, seed=seed,
                    n_train_tokens=len(train_tokens), n_eval_tokens=len(eval_tokens), device=str(device), order=order,
                    tokens_seen=steps * batch_size * context, shared_start=bool(shared_start), draw_d_ff=draw_d_ff)
    threads_before = torch.get_num_threads()
    if num_threads:
        torch.set_num_threads(int(num_threads))
    try:
        results: dict[str, TrainResult] = {}
        for name in variants:
            model = build_twins(model_kwargs, own[name], (name,), draw_d_ff)[name].to(device)
            s = scale if name == "tied_scaled" else 1.0
            offsets, epochs = orders[own[name]]
            log, checkpoints, seconds = _train_one(model, name, s, train_tokens, offsets, context, snap_steps, opt,
                                                   progress, device, surgery if check_variant(name) else None)
            model.eval()
            results[name] = TrainResult(
                variant=name,
                model=model,
                log=log,
                checkpoints=checkpoints,
                eval_loss=evaluate_loss(model, eval_tokens, context, device=device),
                input_grad_scale=s,
                seconds=seconds,
                settings=dict(settings, variant=name, input_grad_scale=s, init_seed=own[name], batch_seed=own[name],
                              epochs=epochs),
            )
    finally:
        torch.set_num_threads(threads_before)
    return results


def mean_row_cosine(a: np.ndarray, b: np.ndarray) -> float:
    """Mean over tokens of the cosine between row i of ``a`` and row i of ``b`` (both (n_vocab, d)).

    A zero row counts as cosine 0 with anything (:func:`tying.analysis.align.rowwise_cosine`).
    """
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    return float(np.mean(rowwise_cosine(a, b, device="cpu", double=True)))


def embedding_evolution(checkpoints: dict[int, tuple[np.ndarray, np.ndarray]], centre: bool = False) -> pd.DataFrame:
    """How far each matrix has moved: mean per-token cosine to step 0 and to the previous snapshot (Figure 3).

    Args:
        checkpoints: ``{step: (input, output)}`` as in :attr:`TrainResult.checkpoints`;
            a pair whose two arrays are one object (or equal at every step) is a tied
            matrix, reported once as ``"T"``; otherwise ``"I"`` and ``"O"``.
        centre: subtract each matrix's column mean before the cosines.

    Returns:
        DataFrame with :data:`EVOLUTION_COLUMNS`, sorted by step then matrix; ``cos_prev``
        is NaN at the first step.
    """
    if not checkpoints:
        return pd.DataFrame(columns=list(EVOLUTION_COLUMNS))
    steps = sorted(checkpoints)
    tied = all(
        checkpoints[s][0] is checkpoints[s][1] or np.array_equal(checkpoints[s][0], checkpoints[s][1]) for s in steps
    )
    roles = (("T", 0),) if tied else (("I", 0), ("O", 1))

    def prepared(x):
        x = np.asarray(x, dtype=np.float64)
        return x - x.mean(axis=0, keepdims=True) if centre else x

    rows = []
    for label, k in roles:
        first = prepared(checkpoints[steps[0]][k])
        prev = None
        for s in steps:
            cur = prepared(checkpoints[s][k])
            rows.append((s, label, mean_row_cosine(cur, first), float("nan") if prev is None else mean_row_cosine(cur, prev)))
            prev = cur
    return pd.DataFrame(rows, columns=list(EVOLUTION_COLUMNS)).sort_values(["step", "matrix"], ignore_index=True)


def save_model(model, tokenizer, out_dir) -> Path:
    """Save ``model`` (safetensors) and ``tokenizer`` with ``save_pretrained`` into ``out_dir``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir)
    if tokenizer is not None:
        tokenizer.save_pretrained(out_dir)
    return out_dir
