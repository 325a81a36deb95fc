"""A deterministic synthetic cache, for the app's tests, benchmarks and demos without models.

The matrices are random but built to show the paper's pattern: O = T + small noise, I
unrelated to both except through a shared part. Alignment and neighbours are computed
with the real numerics; the 2-D coordinates are a PCA (not UMAP: a fixture must be fast);
lens and training tables are synthetic curves. Every value is reproducible from the seed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pandas as pd

from precompute.stages import STAGES
from tying import registry
from tying.analysis import sweep as S
from tying.analysis.align_table import run_alignment
from tying.analysis.neighbours import knn, overlap_curve
from tying.analysis.token_traits import POSITION_RHO
from tying.cache import reference
from tying.cache.schema import MATRICES, MATRIX_PAIRS, pair_label
from tying.cache.store import cache_path
from tying.cache.writer import CacheWriter

SAMPLE_WORDS = ["the", "of", "and", "to", "in", "is", "that", "for", "it", "with", "as", "was", "on", "be",
                "by", "this", "are", "or", "from", "at", "an", "which", "not", "import", "def", "class", "return"]


def byte_token(i: int) -> tuple[str, str]:
    """Raw spelling and text of byte token ``i`` (< 256), as a byte-level BPE shows them."""
    text = chr(i) if 32 <= i < 127 else "\ufffd"
    return (f"<0x{i:02X}>" if text == "\ufffd" else text), text


def _token_strings(n: int, rng: np.random.Generator) -> tuple[list[str], list[str]]:
    raws, texts = [], []
    for i in range(n):
        if i < 256:
            raw, text = byte_token(i)
        else:
            w = SAMPLE_WORDS[i % len(SAMPLE_WORDS)] + ("" if i < 256 + len(SAMPLE_WORDS) else str(i))
            lead = " " if i % 2 else ""
            text, raw = lead + w, ("Ġ" if lead else "") + w
        raws.append(raw)
        texts.append(text)
    texts[300 % n] = "<script>alert('x')</script>"  # escaping must hold wherever tokens are shown
    raws[300 % n] = texts[300 % n]
    return raws, texts


HAND_BUILT = ("load", "alignment", "neighbours", "spectral", "umap", "lens", "training")
"""The stages written below by hand; every other analysis the matrices alone compute (the
registry's ``MATRIX_STAGES``) is computed by its stage's own builder (precompute/stages.py)."""


def build_synthetic_cache(cache_dir, name: str = "synthetic", *, n_tokens: int = 600, d: int = 32, k: int = 20,
                          seed: int = 0, n_layers: int = 4, lens: bool = True, training: bool = True,
                          model_dir: str | Path | None = None) -> Path:
    """Write ``cache_dir/<name>.duckdb`` with every table filled; return its path. ``model_dir``
    (absolute): the twins recorded as its folders ``tied-seed0`` and ``untied-seed0`` and the corpus
    as its ``corpus.txt``, as a toy lab built with an absolute ``--cache-dir`` records them, each
    twin with a weights file's name, size and sha256 (none of them need exist); else the twins as
    ``synthetic/<role>``."""
    rng = np.random.default_rng(seed)
    shared = rng.standard_normal((n_tokens, d)).astype(np.float32)
    T = shared + 0.3 * rng.standard_normal((n_tokens, d)).astype(np.float32)
    O = T + 0.4 * rng.standard_normal((n_tokens, d)).astype(np.float32)
    I = 0.5 * shared + rng.standard_normal((n_tokens, d)).astype(np.float32)
    mats = {"T": T, "I": I, "O": O}
    raws, texts = _token_strings(n_tokens, rng)
    freq = np.maximum(0, (1e5 / (np.arange(n_tokens) + 10) * rng.uniform(0.5, 1.5, n_tokens))).astype(np.int64)
    freq[-10:] = np.arange(10) % 5  # ten rarely seen tokens (0-4 times), two of them never
    path = cache_path(cache_dir, name)
    meta = {"name": name, "kind": "toylab" if training else "pair", "command": f"python -m precompute demo --name {name}",
            "vocabulary": {"n_common": n_tokens, "n_tied": n_tokens, "n_untied": n_tokens, "coverage_tied": 1.0,
                           "coverage_untied": 1.0, "identical": True, "match": "strings", "same_string": 1.0},
            "synthetic": True}
    if training:
        meta["toylab"] = {"d_model": d, "n_layers": n_layers, "vocab_size": n_tokens, "steps": 100, "batch_size": 4,
                          "context": 16, "seeds": 3}
    w = CacheWriter(path, force=True, meta=meta)
    sources = {role: str(Path(model_dir) / f"{role}-seed0") if model_dir else f"synthetic/{role}"
               for role in ("tied", "untied")}
    files = {role: json.dumps([{"name": "model.safetensors", "size": 4 * n_tokens * d * (1 if role == "tied" else 2),
                                "sha256": hashlib.sha256(f"{name}/{role}".encode()).hexdigest()}] if model_dir else [])
             for role in sources}
    models = pd.DataFrame([
        {"role": role, "source": sources[role], "revision": None, "commit_sha": None, "model_type": "llama",
         "tied_in_weights": role == "tied", "d_model": d, "n_vocab": n_tokens, "n_rows_stored": n_tokens,
         "n_params": 10 * n_tokens * d, "n_embedding_params": (1 if role == "tied" else 2) * n_tokens * d,
         "embedding_share": (1 if role == "tied" else 2) / 10, "dtype": "F32", "input_key": "model.embed_tokens.weight",
         "output_key": None if role == "tied" else "lm_head.weight", "fingerprint": json.dumps({"seed": seed}),
         "files": files[role], "load_seconds": 0.0} for role in ("tied", "untied")])
    toks = pd.DataFrame({"token": np.arange(n_tokens, dtype=np.int32), "raw": raws, "text": texts,
                         "tied_id": np.arange(n_tokens, dtype=np.int32), "untied_id": np.arange(n_tokens, dtype=np.int32),
                         "freq_tied": freq, "freq_untied": freq})
    norms = pd.concat([pd.DataFrame({"matrix": m, "token": np.arange(n_tokens, dtype=np.int32),
                                     "norm": np.linalg.norm(x, axis=1)}) for m, x in mats.items()])
    recorded = {**sources, "text": str(Path(model_dir) / "corpus.txt")} if model_dir else {}  # as the demo records them
    w.write_stage("load", {"seed": seed, **recorded},
                  {"models": models, "tokens": toks, "norms": norms}, seconds=0.0)

    results = run_alignment(mats, held_out_fraction=0.2, seed=seed)
    al = [pd.DataFrame({"comparison": r["comparison"], "method": r["method"], "split": r["split"],
                        "token": r["token_idx"].astype(np.int32), "cosine": r["cosine"]}) for r in results if r["applicable"]]
    summ = pd.DataFrame([{k: r[k] for k in ("comparison", "method", "split", "applicable", "note")}
                         | {"n_tokens": len(r["cosine"]), "mean": r["mean"], "std": r["std"]} for r in results])
    w.write_stage("alignment", {"seed": seed}, {"alignment": pd.concat(al), "alignment_summary": summ}, seconds=0.0)

    ids = {}
    frames = []
    for m in MATRICES:
        i, s = knn(mats[m], k)
        ids[m] = i
        frames.append(pd.DataFrame({"matrix": m, "token": np.repeat(np.arange(n_tokens, dtype=np.int32), k),
                                    "rank": np.tile(np.arange(1, k + 1, dtype=np.int16), n_tokens),
                                    "neighbour": i.reshape(-1), "score": s.reshape(-1)}))
    curves = pd.concat([pd.DataFrame({"pair": pair_label(a, b), "k": np.arange(1, k + 1),
                                      "mean_overlap": overlap_curve(ids[a], ids[b], k)}) for a, b in MATRIX_PAIRS])
    w.write_stage("neighbours", {"k": k}, {"neighbours": pd.concat(frames), "overlap_curve": curves}, seconds=0.0)
    w.write_stage("spectral", {}, {"spectral": pd.DataFrame(
        {"pair": [pair_label(a, b) for a, b in MATRIX_PAIRS], "graph_k": 16, "n_components": 16,
         "n_tokens": n_tokens, "n_common": n_tokens, "sampled": False, "distance": [0.6, 0.2, 0.65]})}, seconds=0.0)

    coords = []
    for m, x in mats.items():
        xc = x - x.mean(0)
        _, _, vt = np.linalg.svd(xc[: min(n_tokens, 5000)], full_matrices=False)
        xy = xc @ vt[:2].T
        coords.append(pd.DataFrame({"matrix": m, "token": np.arange(n_tokens, dtype=np.int32),
                                    "x": xy[:, 0].astype(np.float32), "y": xy[:, 1].astype(np.float32)}))
    w.write_stage("umap", {}, {"umap": pd.concat(coords)}, seconds=0.0)

    if lens:
        rows, curve, traj = [], [], []
        for model, bump in (("tied", 2.0), ("untied", 0.0)):
            for layer in range(n_layers + 1):
                base = 6.0 * (1 - layer / n_layers) + (bump if layer <= 1 else 0.0)
                rows.append({"model": model, "lens": "tuned", "layer": layer, "kl_mean": base, "kl_std": 0.5,
                             "n_tokens": 1000})
                rows.append({"model": model, "lens": "logit", "layer": layer, "kl_mean": base * 1.5 + 1,
                             "kl_std": 0.8, "n_tokens": 1000})
                curve += [{"model": model, "step": st, "layer": layer, "kl_bits": base + 3 / st} for st in (1, 10, 50)]
            words = ["def", " f", "(", "x", "):", " return"]
            for pos, tok in enumerate(words):
                for layer in range(n_layers + 1):
                    for lens_name in ("tuned", "logit"):
                        for rank in (1, 2, 3):
                            traj.append({"model": model, "sample": 0, "position": pos, "token": tok, "layer": layer,
                                         "lens": lens_name, "rank": rank,
                                         "prediction": words[(pos + rank) % len(words)],
                                         "prob": round(0.9 * layer / n_layers / rank, 3)})
        w.write_stage("lens", {}, {"lens_kl": pd.DataFrame(rows), "lens_curve": pd.DataFrame(curve),
                                   "lens_trajectory": pd.DataFrame(traj)}, seconds=0.0)
    if training:
        steps = np.arange(1, 101)
        runs, logs, evo, scal, seeds = [], [], [], [], []
        for variant, scale in (("tied", 1.0), ("untied", 1.0), ("tied_scaled", 5.0)):
            run = f"{variant if variant != 'tied_scaled' else 'tied_scaled_x5'}/seed0"
            runs.append({"run": run, "variant": variant, "seed": 0, "input_grad_scale": scale, "steps": 100,
                         "final_loss": 3.0, "eval_loss": 3.1, "seconds": 1.0, "source": "synthetic", "settings": "{}",
                         "early_steps": 10, "input_norm": "exact"})
            gin = scale * (0.2 + 0.8 * np.exp(-steps / 30))
            gout = 1.0 + 0.5 * np.exp(-steps / 20)
            logs.append(pd.DataFrame({"run": run, "step": steps, "loss": 5 - np.log1p(steps) / 2, "grad_input_norm": gin,
                                      "grad_output_norm": gout, "grad_total_norm": np.hypot(gin, gout),
                                      "output_share": gout / (gin + gout), "grad_input_proxy_norm": 1.3 * gin}))
            for m in (("T",) if variant != "untied" else ("I", "O")):
                ck = [0, 1, 3, 10, 30, 100]
                drift = {"T": 0.6, "I": 0.9, "O": 0.55}[m]
                cos = [1.0] + [drift + (1 - drift) * np.exp(-c / 20) for c in ck[1:]]
                evo.append(pd.DataFrame({"run": run, "step": ck, "label": [str(c) for c in ck], "matrix": m,
                                         "cos_init": cos, "cos_prev": [np.nan] + [0.95] * (len(ck) - 1)}))
            if variant != "untied":
                for target, base in (("I", 0.3), ("O", 0.6)):
                    shift = 0.05 * (scale - 1) / 4
                    val = base + shift if target == "I" else base - shift
                    for method, offset in (("identity", 0.0), (reference.TABLE2_METHOD, 0.1)):
                        scal.append({"run": run, "seed": 0, "input_grad_scale": scale, "target": target,
                                     "method": method, "mean_cosine": val + offset})
        seeds = [{"seed": seed_i, "metric": metric, "value": value + 0.01 * seed_i}
                 for seed_i in range(3)
                 for metric, value in (("output share early", 0.62), ("output share early (proxy input)", 0.64),
                                       ("O->T linear in-sample", 0.85), ("I->T linear in-sample", 0.55),
                                       ("O->T linear held-out", 0.8),
                                       ("I->T linear held-out", 0.5), ("overlap@10 T~O", 0.4),
                                       ("overlap@10 T~I", 0.1), (POSITION_RHO, -0.04))]
        w.write_stage("training", {}, {"runs": pd.DataFrame(runs), "train_log": pd.concat(logs),
                                       "evolution": pd.concat(evo), "scaling": pd.DataFrame(scal),
                                       "seed_metrics": pd.DataFrame(seeds)}, seconds=0.0)
    for name in registry.MATRIX_STAGES:  # an analysis added through the registry: its own builder on these matrices
        if name not in HAND_BUILT:
            run = SimpleNamespace(matrices=mats, n=n_tokens, device=None, cfg=None, counts=freq, counts_source="corpus.txt")
            tables, ran = STAGES[name].build(run, lambda message: None)
            w.write_stage(name, {}, tables, seconds=0.0, record={"ran": ran} if ran else None)
    return path


def build_sweep_cache(cache_dir, gaps: dict[int, list[float]], name: str = "sweep", vocab_size: int = 4096):
    """A width-sweep cache as `precompute sweep` writes it, with known loss gaps (untied minus
    tied eval loss) per width and seed; the other numbers are plain (for the app's tests)."""

    w = CacheWriter(Path(cache_dir) / f"{name}.duckdb",
                    meta={"kind": "sweep", "name": name, "sweep": {"n_layers": 4, "steps": 250, "batch_size": 16,
                                                                    "context": 64, "corpus": "python-docs"}})
    for d, per_seed in gaps.items():
        for seed, gap in enumerate(per_seed):
            cell = S.Cell(d, vocab_size, seed)
            params_tied = 12 * 4 * d * d + vocab_size * d
            row = {m: 0.5 for m in S.METRICS} | {
                "d_model": d, "vocab_size": vocab_size, "seed": seed, "n_layers": 4, "steps": 250,
                "linear_o_t": 0.8, "linear_i_t": 0.4, "overlap_t_o": 0.3, "overlap_t_i": 0.05,
                "eval_loss_tied": 5.0, "eval_loss_untied": 5.0 + gap, "params_tied": params_tied,
                "params_untied": params_tied + vocab_size * d, "embedding_share_tied": vocab_size * d / params_tied,
                "seconds": 1.0}
            w.write_cell(cell.stage, {"stage": cell.stage, "steps": 250}, "sweep", pd.DataFrame([row]),
                         {"d_model": d, "vocab_size": vocab_size, "seed": seed}, seconds=1.0)
    return w.path


MECHANISM_RUNS = {"baseline": (0.50, 0.87, 0.10, 0.37), "null": (0.50, 0.87, 0.10, 0.37),
                  "size": (0.50, 0.79, 0.10, 0.25), "size_update": (0.56, 0.80, 0.13, 0.22),
                  "reach": (0.52, 0.83, 0.11, 0.12), "both": (0.55, 0.75, 0.12, 0.10),
                  "sgd": (0.45, 0.65, 0.08, 0.14), "input_x5": (0.54, 0.78, 0.11, 0.23)}
"""The mechanism fixture's (I→T, O→T, T~I, T~O) per arm, before each seed's small offset: the size
arm only leaves O (mixed), the update-balanced arm comes closer to I (holds)."""


def build_mechanism_cache(cache_dir, name: str = "mechanism", seeds: int = 3, steps: int = 250):
    """A mechanism-lab cache as `precompute mechanism` writes it: every arm of
    :data:`MECHANISM_RUNS`, the untied twins per seed (by AdamW, and by SGD for the SGD arm), each
    arm's bias growing from 0 at step 0 to its value at the last step, and three SGD probes (the
    lowest at 1.0)."""
    from tying.analysis import mechanism as M

    settings = {"name": name, "seeds": seeds, "arms": list(M.ARMS), "vocab_size": 4096, "d_model": 128,
                "n_layers": 4, "n_heads": 4, "context": 64, "batch_size": 16, "steps": steps, "lr": 3e-3,
                "sgd_lr_grid": [0.3, 1.0, 3.0], "sgd_steps": 2 * steps, "checkpoints": 4, "shared_start": False}
    w = CacheWriter(Path(cache_dir) / f"{name}.duckdb",
                    meta={"kind": "mechanism", "name": name, "command": f"python -m precompute mechanism --seeds {seeds}",
                          "mechanism": settings})
    w.write_cell("mechanism:lr", {"stage": "mechanism:lr"}, "mechanism_probe",
                 pd.DataFrame({"lr": [0.3, 1.0, 3.0], "steps": 2 * steps, "loss": [6.9, 6.7, 7.0]}),
                 {"steps": 2 * steps}, seconds=0.0)
    checkpoints = [0, 10, 50, steps]
    for seed in range(seeds):
        for twin, optimizer, n in ((M.UNTIED, "adamw", steps), (M.UNTIED_SGD, "sgd", 2 * steps)):
            untied = dict.fromkeys(M.RUN_COLUMNS) | {"arm": twin, "seed": seed, "optimizer": optimizer, "steps": n,
                                                     "lr": 1.0 if optimizer == "sgd" else 3e-3, "seconds": 1.0,
                                                     "cos_start_input_untied": 0.65, "eval_loss": 5.8,
                                                     "unigram_loss": 6.7}
            w.write_cells(f"mechanism:{twin}:s{seed}", {"seed": seed}, {"mechanism": pd.DataFrame([untied])},
                          {"arm": twin, "seed": seed}, seconds=1.0)
        for a, (arm, (i_t, o_t, i_ov, o_ov)) in enumerate(MECHANISM_RUNS.items()):
            spread = (seed - 1) * (1 + a % 3)  # the seeds differ, and by more in some arms
            i_t, o_t, o_ov = i_t + 0.001 * spread, o_t + 0.004 * spread, o_ov + 0.003 * spread
            sgd = M.ARMS[arm].optimizer == "sgd"
            row = {"arm": arm, "seed": seed, "optimizer": M.ARMS[arm].optimizer, "lr": 1.0 if sgd else 3e-3,
                   "steps": 2 * steps if sgd else steps, "linear_o_t_in": o_t, "linear_i_t_in": i_t,
                   "bias": o_t - i_t, "linear_o_t": o_t - 0.1, "linear_i_t": i_t - 0.1, "overlap_t_o": o_ov,
                   "overlap_t_i": i_ov, "bias_overlap": o_ov - i_ov, "output_share_early": 0.84,
                   "output_share_early_proxy": 0.8, "output_share_applied_early": 0.5 if M.ARMS[arm].size else 0.84,
                   "cos_start_tied": 0.4, "cos_start_input_untied": 0.65, "eval_loss": 6.4 if sgd else 5.75,
                   "seconds": 1.0, "identity_raw_o_t": 0.01, "unigram_loss": 6.7,
                   "update_norm_gap": 0.0 if M.ARMS[arm].update else None}
            curve = pd.DataFrame([{"arm": arm, "seed": seed, "step": s, "linear_o_t_in": i_t + (o_t - i_t) * s / steps,
                                   "linear_i_t_in": i_t, "bias": (o_t - i_t) * s / steps} for s in checkpoints],
                                 columns=list(M.CURVE_COLUMNS))
            w.write_cells(f"mechanism:{arm}:s{seed}", {"arm": arm, "seed": seed},
                          {"mechanism": pd.DataFrame([row]), "mechanism_curve": curve}, {"arm": arm, "seed": seed},
                          seconds=1.0)
    return w.path
