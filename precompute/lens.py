"""The lens stage: tuned- and logit-lens KL per hidden state for both models of a pair.

Text: the toy corpus (Python's documentation) by default, a text file, or ``hf:<dataset>``
(WikiText, as the paper used, when online). Paragraphs are split once: the first part
trains the tuned lens, the rest evaluates it, so training and evaluation text are
disjoint. Trained lens weights are saved beside the cache with a fingerprint of the
unembedding they belong to, and reused on a rerun when it matches.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pandas as pd

from tying.errors import UserError

EVAL_FRACTION = 0.2


@dataclass
class LensOptions:
    """Options of the lens stage (CLI: --lens-*)."""

    text: str = "python-docs"  # 'python-docs', a text file, or 'hf:<dataset>'
    steps: int = 250  # tuned-lens training steps per model
    batch_size: int = 8
    seq_len: int = 128  # capped at the model's context length
    train_tokens: int = 262_144
    eval_tokens: int = 65_536
    samples: int = 3  # sample texts for prediction trajectories
    top_k: int = 5
    max_chars: int = 1_200_000

    def params(self) -> dict:
        return dict(self.__dict__)


def lens_text(spec: str, max_chars: int) -> tuple[list[str], list[str]]:
    """Training and evaluation paragraphs (disjoint) of the lens text."""
    from precompute.toylab import load_corpus

    text = load_corpus(spec, max_chars)
    paras = [p for p in text.split("\n\n") if p.strip()]
    if len(paras) < 5:
        raise UserError("no text to evaluate the lens on: the lens text has fewer than 5 paragraphs")
    cut = max(1, int(len(paras) * (1 - EVAL_FRACTION)))
    return paras[:cut], paras[cut:]


def _load_model(local_dir: str, device, trust_remote_code: bool):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    dtype = torch.bfloat16 if device.type == "cuda" else torch.float32
    try:
        model = AutoModelForCausalLM.from_pretrained(local_dir, dtype=dtype, trust_remote_code=trust_remote_code)
        tok = AutoTokenizer.from_pretrained(local_dir, trust_remote_code=trust_remote_code)
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the model in '{local_dir}' for the lens: {str(exc).splitlines()[0]}") from None
    return model.to(device).eval(), tok


def lens_tables(models: dict[str, str], opts: LensOptions, *, lens_dir: Path, device, trust_remote_code: bool = False,
                progress: Callable[[str], None] = lambda m: None) -> dict[str, pd.DataFrame]:
    """Tables lens_kl, lens_curve and lens_trajectory for ``{role: local model folder}``."""
    from tying import lens as L

    train_paras, eval_paras = lens_text(opts.text, opts.max_chars)
    kl, curves, trajs = [], [], []
    for role, local_dir in models.items():
        progress(f"{role}: loading the model")
        model, tok = _load_model(local_dir, device, trust_remote_code)
        ctx = getattr(model.config, "max_position_embeddings", None) or opts.seq_len
        seq = min(opts.seq_len, int(ctx))
        train = L.text_batches(tok, train_paras, seq_len=seq, batch_size=opts.batch_size, max_tokens=opts.train_tokens)
        evals = L.text_batches(tok, eval_paras, seq_len=seq, batch_size=opts.batch_size, max_tokens=opts.eval_tokens)
        parts = L.find_lens_parts(model)
        fp = L.unembedding_fingerprint(parts)
        text_key = hashlib.sha256(repr((opts.params(), len(train_paras))).encode()).hexdigest()[:12]
        path = lens_dir / f"{role}-{text_key}.safetensors"
        lens = L.load_lens(path, fp, device=device) if path.exists() else None
        if lens is None:
            def report(step, steps, loss, role=role):
                if step % 10 == 0 or step == steps:
                    progress(f"{role}: tuned lens step {step}/{steps}, KL {loss:.2f}")

            lens, curve = L.train_tuned_lens(model, train, steps=opts.steps, device=device, parts=parts,
                                             progress=report)
            L.save_lens(lens, path, fp, {"role": role, "model": local_dir, "options": opts.params(), "curve":
                                         curve.to_dict("list")})
        else:
            progress(f"{role}: reusing the tuned lens in {path.name} (same unembedding)")
            curve = pd.DataFrame(L.read_lens_meta(path).get("meta", {}).get("curve") or
                                 {"step": [], "layer": [], "kl_bits": []})
        progress(f"{role}: evaluating")
        tuned = L.evaluate_lens(model, evals, lens, device=device, parts=parts)
        kl.append(tuned.assign(model=role))
        curves.append(curve.assign(model=role))
        for i, text in enumerate(eval_paras[: opts.samples]):
            t = L.prediction_trajectory(model, tok, text, lens, top_k=opts.top_k, device=device, parts=parts)
            trajs.append(t.assign(model=role, sample=i))
        del model
    lens_kl = pd.concat(kl, ignore_index=True)
    if "lens" not in lens_kl.columns:
        raise UserError("lens evaluation returned no lens column")
    return {"lens_kl": lens_kl, "lens_curve": pd.concat(curves, ignore_index=True),
            "lens_trajectory": pd.concat(trajs, ignore_index=True)}
