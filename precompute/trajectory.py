"""Prediction trajectories of a cache's models on any text: ``python -m precompute trajectory``.

It prints JSON. It needs the cache's models on this machine (always so for the toy lab's
twins) and uses the cache's tuned-lens translators when one fits the model's unembedding;
without one, the logit lens only. :class:`Tracer` loads them once and traces any number of
texts: the app's warm worker (``python -m precompute serve-trajectory``, :mod:`precompute.serve`)
keeps one for a visitor's own texts on the Lens page, so the app itself never imports torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from precompute.options import cache_dir_option, check_positive, device_option, option
from tying.cache.store import CacheError, finished_stages, open_cache, stage_params
from tying.cache.summary import summarize_cache
from tying.errors import UserError
from tying.layout import lens_files, model_dirs
from tying.lens import LensBudget

MAX_TEXT_CHARS = 2000


def check_text(text: object, visible: str = "give --text with at least one visible character") -> str:
    """The text to trace, or UserError (one line): empty, too long, or not valid UTF-8 (a byte no
    encoding gives arrives from the command line as a lone surrogate, as does one in JSON)."""
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"no text: {visible}")
    if len(text) > MAX_TEXT_CHARS:
        raise UserError(f"the text has {len(text):,} characters; at most {MAX_TEXT_CHARS:,}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise UserError(f"the text is not valid UTF-8: character {exc.start + 1} is a byte or a lone surrogate "
                        "that no character encodes") from None
    return text


@dataclass
class TrajectoryConfig:
    """What `precompute trajectory` does; checked when built."""

    cache: str = option(positional=True, help="a cache file (`cache/<name>.duckdb`) or a pair name in `--cache-dir`")
    text: str = option(help=f"the text to trace (at most {MAX_TEXT_CHARS:,} characters); one that starts with `-` "
                            "as `--text=-x`")
    cache_dir: str = cache_dir_option()
    top_k: int = option(10, help="predictions per cell")
    max_tokens: int = option(32, help="the text is cut to this many tokens (at most 256)")
    device: str | None = device_option()
    trust_remote_code: bool = option(False, help="allow model code from the model's folder (off by default)")

    def __post_init__(self) -> None:
        if self.text == []:  # argparse took the text '--' (--text=--) for its separator and left nothing
            self.text = "--"
        check_text(self.text)
        if not 1 <= self.max_tokens <= 256:
            raise UserError(f"--max-tokens must be between 1 and 256, got {self.max_tokens}")
        check_positive(self, "top_k")


def _stage_params(cache_path: Path) -> tuple[dict, dict]:
    """The load stage's and the lens stage's recorded parameters."""
    try:
        con = open_cache(cache_path)
    except CacheError as exc:
        raise UserError(exc.message) from None
    try:
        summarize_cache(con, cache_path)  # a damaged cache says so (its name, its reason), not "no lens"
        stages = finished_stages(con)
    except CacheError as exc:
        raise UserError(exc.message) from None
    finally:
        con.close()
    return stage_params(stages, "load"), stage_params(stages, "lens")


def fitting_lens(cache_path: Path, role: str, parts, lens_stage: dict, device=None):
    """``(tuned lens, its file)`` of the cache's ``role`` model: the first of its translator
    files (those trained with the lens stage's recorded budget first) whose unembedding
    fingerprint is the model's (``parts``); ``(None, None)`` when none fits."""
    from tying.lens.files import load_lens, unembedding_fingerprint

    fp = unembedding_fingerprint(parts)
    for f in lens_files(cache_path, role, LensBudget.recorded((lens_stage or {}).get("budget"), role)):
        lens = load_lens(f, fp, device=device)
        if lens is not None:
            return lens, f
    return None, None


def _silent(done: int, of: int, doing: str) -> None:
    pass


class Tracer:
    """A cache's models and their translators, loaded once; :meth:`trace` runs them on a text.

    The one-shot ``trajectory`` command makes one per run; ``serve-trajectory``
    (:mod:`precompute.serve`) keeps one for every text of its queue and passes ``progress``:
    called ``(steps done, steps in all, what it is doing)`` while the models and their tuned
    lenses load (four steps a model: its configuration, weights, tokenizer and tuned lens) and
    while a text is read (one step a lens and hidden state).
    """

    def __init__(self, cache_path: Path, device: str | None = None, *, trust_remote_code: bool = False,
                 progress: Callable[[int, int, str], None] = _silent):
        from tying.device import as_device
        from tying.lens.parts import find_lens_parts
        from tying.loading.causal_lm import LOAD_STEPS, load_causal_lm

        if not cache_path.is_file():
            raise UserError(f"no cache at {cache_path}")
        load, lens_stage = _stage_params(cache_path)
        dirs = model_dirs(load, cache_path)
        if not dirs:
            raise UserError(f"the models of {cache_path.name} are not on this machine (the cache records where "
                            "they were when it was built)")
        self.device = as_device(device)
        self.progress = progress
        self._loaded = []  # (role, model, tokenizer, lens parts, tuned lens or None)
        self._vocab: dict[str, list[str]] = {}  # {role: each token id's decoded text}, for pins
        self.models: dict[str, dict] = {}  # {role: {"model": folder, "lens": translator file or None}}
        per_model = len(LOAD_STEPS) + 1  # the model's, then its tuned lens
        steps = per_model * len(dirs)
        for i, (role, folder) in enumerate(dirs.items()):
            who = self._who(role, len(dirs))
            model, tok = load_causal_lm(str(folder), self.device, trust_remote_code=trust_remote_code,
                                        progress=lambda k, what, i=i, who=who, name=Path(folder).name:
                                        progress(per_model * i + k, steps, f"loading {who} ({name}): {what}"))
            parts = find_lens_parts(model)
            progress(per_model * (i + 1) - 1, steps, f"loading the tuned lens of {who}")
            lens, lens_file = fitting_lens(cache_path, role, parts, lens_stage, self.device)
            self._loaded.append((role, model, tok, parts, lens))
            self.models[role] = {"model": str(folder), "lens": str(lens_file) if lens_file else None}
        progress(steps, steps, "ready")

    @staticmethod
    def _who(role: str, n_models: int) -> str:
        return "the model" if n_models == 1 else f"the {role} model"

    def _reading(self, texts: int = 1) -> Callable[[str, str, int, int], None]:
        """A text's progress: called (role, lens name, layer, hidden states) after each reading."""
        total = sum((1 if lens is None else 2) * parts.n_hidden for _, _, _, parts, lens in self._loaded)
        done = 0
        what = "your text" if texts == 1 else f"{texts} texts"

        def tick(role: str, name: str, layer: int, n_hidden: int) -> None:
            nonlocal done
            done += 1
            who = "" if len(self._loaded) == 1 else f"{self._who(role, 2)}, "
            self.progress(done, total, f"reading {what}: {who}{name} lens, hidden state {layer} of {n_hidden - 1}")

        return tick

    def trace(self, text: str, *, top_k: int = 10, max_tokens: int = 32) -> pd.DataFrame:
        """One row per model x lens x hidden state x position x rank (the lens_trajectory columns
        and ``model``). UserError (one line) when the text cannot be traced."""
        from tying.lens.evaluate import prediction_trajectory
        from tying.lens.lenses import LogitLens

        frames, tick = [], self._reading()
        for role, model, tok, parts, lens in self._loaded:
            lenses = [LogitLens()] if lens is None else [lens, LogitLens()]
            try:
                t = prediction_trajectory(model, tok, text, lenses, top_k=top_k, max_tokens=max_tokens,
                                          device=self.device, parts=parts,
                                          progress=lambda name, layer, role=role, n=parts.n_hidden:
                                          tick(role, name, layer, n))
            except ValueError as exc:
                raise UserError(str(exc)) from None
            frames.append(t.assign(model=role))
        return pd.concat(frames, ignore_index=True)

    def follow(self, text: str, pins, *, max_tokens: int = 32) -> tuple[pd.DataFrame, dict[str, list[str]]]:
        """Each pinned text's probability at every hidden state and position of ``text``, per model and
        lens, from the full softmax: rows (model, lens, layer, position, pin, prob); and per model the
        pins that are no single token of its vocabulary (left out of the rows)."""
        from tying.lens.evaluate import pinned_probabilities
        from tying.lens.follow import pin_ids
        from tying.lens.lenses import LogitLens

        frames, unknown = [], {}
        for role, model, tok, parts, lens in self._loaded:
            if role not in self._vocab:  # every id decoded once, as the trajectory decodes it
                self._vocab[role] = [tok.decode([i]) for i in range(parts.unembed.weight.shape[0])]
            ids = pin_ids(self._vocab[role], pins)
            unknown[role] = [p for p, i in ids.items() if i is None]
            known = {i: p for p, i in ids.items() if i is not None}
            if not known:
                continue
            try:
                t = pinned_probabilities(model, tok, text, [LogitLens()] if lens is None else [lens, LogitLens()],
                                         list(known), max_tokens=max_tokens, device=self.device, parts=parts)
            except ValueError as exc:
                raise UserError(str(exc)) from None
            frames.append(t.assign(model=role, pin=t["token_id"].map(known)).drop(columns="token_id"))
        columns = ["model", "lens", "layer", "position", "pin", "prob"]
        rows = pd.concat(frames, ignore_index=True)[columns] if frames else pd.DataFrame(columns=columns)
        return rows, unknown

    def trace_many(self, texts: list[str], *, top_k: int = 10, max_tokens: int = 32) -> list[pd.DataFrame]:
        """:meth:`trace` of each text, with one forward pass per model for them all (the texts
        right-padded: a causal model's prediction at a position does not see the padding after
        it), so a queue of texts costs little more than one. The numbers may differ from
        :meth:`trace`'s in the last bits of float rounding (other matrix shapes); a single text
        goes through :meth:`trace` itself. UserError when one of the texts cannot be traced
        (trace them one by one to learn which)."""
        if len(texts) == 1:
            return [self.trace(texts[0], top_k=top_k, max_tokens=max_tokens)]
        import numpy as np
        import torch

        from tying.lens.evaluate import trajectory_frame
        from tying.lens.lenses import LogitLens
        from tying.lens.parts import residual_stream
        from tying.lens.run import chunks

        per_text: list[list[pd.DataFrame]] = [[] for _ in texts]
        tick = self._reading(len(texts))
        for role, model, tok, parts, lens in self._loaded:
            context = getattr(getattr(model, "config", None), "max_position_embeddings", None)
            limit = int(max_tokens) if not context else min(int(max_tokens), int(context))
            ids = [row[:limit] for row in tok(list(texts), verbose=False)["input_ids"]]
            if not all(ids):
                raise UserError("no text to trace predictions on")
            width = max(map(len, ids))
            x = torch.zeros((len(ids), width), dtype=torch.long)
            real = torch.zeros((len(ids), width), dtype=torch.bool)
            for b, row in enumerate(ids):
                x[b, :len(row)] = torch.tensor(row)
                real[b, :len(row)] = True
            blocks = []  # (lens name, layer, probs, token ids), over the texts' real positions in order
            with torch.no_grad():
                hs = residual_stream(model, parts, x.to(self.device))
                real = real.to(self.device)
                for kind in ([LogitLens()] if lens is None else [lens, LogitLens()]):
                    for layer in range(parts.n_hidden):
                        h = hs[layer][real]
                        probs, top = [], []
                        for rows in chunks(h.shape[0], 1024):  # bounds the logits' memory
                            logits = kind.logits(parts, h[rows], layer).float()
                            if not 1 <= int(top_k) <= logits.shape[-1]:
                                raise UserError(f"top_k must be between 1 and the vocabulary size "
                                                f"({logits.shape[-1]}), got {top_k}")
                            p, t = torch.softmax(logits, dim=-1).topk(int(top_k), dim=-1)
                            probs.append(p.cpu().numpy().astype(np.float64))
                            top.append(t.cpu().numpy())
                        blocks.append((kind.name, layer, np.concatenate(probs), np.concatenate(top)))
                        tick(role, kind.name, layer, parts.n_hidden)
            decoded: dict[int, str] = {}

            def decode(i: int, tok=tok, decoded=decoded) -> str:
                if i not in decoded:
                    decoded[i] = tok.decode([i])
                return decoded[i]

            start = 0
            for b, row in enumerate(ids):
                n_pos, k = len(row), int(top_k)
                tokens = [decode(i) for i in row]
                position = np.repeat(np.arange(n_pos), k)
                cols = {"position": [], "layer": [], "lens": [], "rank": [], "pred_id": [], "prob": []}
                for name, layer, probs, top in blocks:
                    cols["position"].append(position)
                    cols["layer"].append(np.full(n_pos * k, layer))
                    cols["lens"].append(np.full(n_pos * k, name, dtype=object))
                    cols["rank"].append(np.tile(np.arange(1, k + 1), n_pos))
                    cols["pred_id"].append(top[start:start + n_pos].reshape(-1))
                    cols["prob"].append(probs[start:start + n_pos].reshape(-1))
                flat = {key: np.concatenate(v) for key, v in cols.items()}
                per_text[b].append(trajectory_frame(flat, tokens, decode).assign(model=role))
                start += n_pos
        return [pd.concat(frames, ignore_index=True) for frames in per_text]


def run_trajectory(cfg: TrajectoryConfig, cache_path: Path) -> dict:
    """{"models": {role: {"model": folder, "lens": translator file or None}}, "rows": [...]}:
    one row per model x lens x hidden state x position x rank (the lens_trajectory columns)."""
    tracer = Tracer(cache_path, cfg.device, trust_remote_code=cfg.trust_remote_code)
    rows = tracer.trace(cfg.text, top_k=cfg.top_k, max_tokens=cfg.max_tokens)
    return {"models": tracer.models, "rows": rows.to_dict("records")}
