"""The options of `precompute sweep` and `precompute sweep-merge`: the grid (widths, vocabulary
sizes, seeds), the training budget and learning-rate grid every cell shares, the job array, and the
sweep's protocol (a cell of another protocol is trained again). Run by :mod:`precompute.sweep`.
"""

from __future__ import annotations

import copy
from dataclasses import InitVar, dataclass, fields

from precompute.options import cache_dir_option, device_option, flag_of, internal, option
from precompute.toylab import TwinSettings
from tying.analysis import sweep as S
from tying.cache.store import check_name
from tying.errors import UserError

QUICK = {"widths": [32, 64, 128], "seeds": 2, "steps": 100, "lr_grid": [3e-3]}
FULL = {"widths": [32, 64, 128, 256], "seeds": 3, "steps": TwinSettings.steps, "lr_grid": [1e-3, 3e-3, 1e-2]}

PROTOCOL = 4
"""The sweep's protocol: 2 added the matched arm, baselines, the budget, epochs and the learning-rate
choice (issue 20); 3 widens the matched arm's feed-forward layers instead of deepening it, stores
every learning-rate probe (``lr_probe``), scores the probes on the validation split, and records
the in-sample linear map, the untied input matrix's cosine to its start and the bigram's training
tokens (issue 29); 4 starts the matched arm from the tied twin's draw, widened, and records every
arm's FLOPs per token and T's raw-row cosine with O (issue 48). A cell of another protocol is
trained again."""


def _by_quick(key: str) -> str:
    """How a default that --quick changes reads: "3; `--quick`: 2"."""
    show = lambda v: ",".join(map(str, v)) if isinstance(v, list) else str(v)
    return f"{show(FULL[key])}; `--quick`: {show(QUICK[key])}"


@dataclass
class SweepConfig(TwinSettings):
    """What `precompute sweep` does: each option field is the CLI option of its name (or of its
    ``flag``), checked when the config is built. Widths, seeds and steps left unset are FULL's,
    or QUICK's with ``quick=True``."""

    name: str = option("sweep", help="cache name")
    cache_dir: str = cache_dir_option()
    work_dir: str | None = option(None, shown="`<cache-dir>/toylab/<name>`", help="where the tokenizers go")
    widths: list[int] | None = option(None, flag="--d-model", shown=_by_quick("widths"), help="widths, comma-separated")
    vocab_sizes: list[int] = option([4096], flag="--vocab-size", help="BPE vocabulary sizes, comma-separated "
                                    "(one BPE per size)")
    seeds: int | None = option(None, shown=_by_quick("seeds"), help="seeds per cell")
    steps: int | None = option(None, shown=_by_quick("steps"), help="optimiser steps per arm (unless `--tokens` or "
                               "`--tokens-per-param` sets them)")
    tokens: int | None = option(None, help="training tokens per arm in every cell (steps = tokens / (batch size x "
                                "context), rounded up; warm-up and decay scale with them)")
    tokens_per_param: float | None = option(None, help="training tokens per parameter of the untied twin, per "
                                            "width (the arms of a cell read the same tokens); more than the corpus "
                                            "holds is read in epochs, printed and recorded")
    lr_grid: list[float] | None = option(None, shown=_by_quick("lr_grid"), help="peak learning rates to try per "
                                         "width and arm (probe runs of seed 0 scored on the validation split, the "
                                         "last 5 percent of the training tokens; disjoint from the evaluation windows; "
                                         "one value: no probes, that rate everywhere)")
    lr_probe: float = option(0.25, help="share of a cell's steps each learning-rate probe run takes")
    executor: str | None = option(None, choices=("local", "slurm"), shown="none (train here, in this process)",
                                  help="run the grid as a job array through submitit, `--jobs` tasks each "
                                  "training one `--shard i/n`, merged into `cache/<name>.duckdb` at the end")
    jobs: int = option(2, help="tasks of the job array with `--executor`")
    slurm_partition: str | None = option(None, help="SLURM partition with `--executor slurm`")
    cpus_per_task: int = option(2, help="CPU cores per task with `--executor` (torch threads)")
    timeout_min: int = option(120, help="time limit per task in minutes with `--executor`")
    quick: InitVar[bool] = option(False, help="a small sweep for a first look (widths, seeds and steps as said "
                                  "above; within 5 minutes on 2 cores)")
    shard: str | None = option(None, help="`i/n`: train every n-th cell from the i-th (0 <= i < n), into "
                               "`cache/<name>.shard<i>of<n>.duckdb`")
    force: bool = option(False, help="retrain and recompute everything")
    device: str | None = device_option()
    command: str | None = internal(None)
    threads: int | None = internal(None)

    def __post_init__(self, quick: bool) -> None:
        if self.steps is not None and (self.tokens is not None or self.tokens_per_param is not None):
            raise UserError("give --steps or a budget (--tokens, --tokens-per-param), not both")
        budget = self.tokens is not None or self.tokens_per_param is not None
        for key in ("widths", "seeds", "steps", "lr_grid"):
            if getattr(self, key) is None and not (key == "steps" and budget):
                setattr(self, key, copy.copy((QUICK if quick else FULL)[key]))
        self.check()

    def cell_steps(self, d_model: int, vocab_size: int) -> int:
        """Optimiser steps of every arm of a cell: the budget's, or ``--steps``."""
        if self.tokens is not None:
            return S.budget_steps(self.tokens, self.batch_size, self.context)
        if self.tokens_per_param is not None:
            untied = S.llama_params(vocab_size, d_model, self.n_layers, tied=False)
            return S.budget_steps(self.tokens_per_param * untied, self.batch_size, self.context)
        return self.steps

    def check(self) -> None:
        """UserError (one line, naming the option) for the first bad setting."""
        check_name(self.name)
        for key in ("widths", "vocab_sizes"):
            values, flag = getattr(self, key), flag_of(SweepConfig, key)
            if any(v < 1 for v in values):
                raise UserError(f"{flag}: every value must be positive, got {','.join(map(str, values))}")
            twice = sorted({v for v in values if values.count(v) > 1})
            if twice:
                raise UserError(f"{flag}: {','.join(map(str, twice))} given more than once")
        S.check_grid(self.widths, self.vocab_sizes, self.seeds, self.n_heads)
        S.parse_shard(self.shard)
        self.check_twins()
        if self.steps is not None and self.steps < 2:
            raise UserError(f"--steps must be at least 2, got {self.steps}")
        if self.tokens is not None and self.tokens_per_param is not None:
            raise UserError("give --tokens or --tokens-per-param, not both")
        if self.tokens is not None and self.tokens < 1:
            raise UserError(f"--tokens must be positive, got {self.tokens}")
        if self.tokens_per_param is not None and not self.tokens_per_param > 0:
            raise UserError(f"--tokens-per-param must be > 0, got {self.tokens_per_param:g}")
        if not self.lr_grid or any(not lr > 0 for lr in self.lr_grid):
            raise UserError("--lr-grid: every rate must be > 0, got " + (",".join(f"{v:g}" for v in self.lr_grid)
                                                                         or "nothing"))
        if len(set(self.lr_grid)) < len(self.lr_grid):
            raise UserError("--lr-grid: a rate is given more than once")
        if not 0 < self.lr_probe <= 1:
            raise UserError(f"--lr-probe must lie in (0, 1], got {self.lr_probe:g}")
        for key in ("jobs", "cpus_per_task", "timeout_min"):
            if getattr(self, key) < 1:
                raise UserError(f"{flag_of(SweepConfig, key)} must be positive, got {getattr(self, key)}")
        if self.executor is not None and self.shard is not None:
            raise UserError("--executor cuts the grid into shards itself: leave out --shard")
        far = [(v, d) for v in self.vocab_sizes for d in self.widths
               if S.match_error(v, d, self.n_layers) > S.MATCH_TOLERANCE]
        if far:
            v, d = far[0]
            raise UserError(f"--d-model {d}: no widened tied model is within {S.MATCH_TOLERANCE:.0%} of the untied "
                            f"twin's parameters at vocabulary {v} (the width is too large for the vocabulary)")

    def training(self) -> dict:
        """The settings every cell shares (a cell's stage is redone when they change)."""
        out = self.twin_params([f.name for f in fields(TwinSettings)])
        return dict(out, protocol=PROTOCOL, tokens=self.tokens, tokens_per_param=self.tokens_per_param,
                    lr_grid=list(self.lr_grid), lr_probe=self.lr_probe)


def validate(cfg: SweepConfig) -> None:
    """The checks of :meth:`SweepConfig.check` again, for a config changed after it was built."""
    cfg.check()


@dataclass
class MergeConfig:
    """What `precompute sweep-merge` does."""

    shards: list[str] = option(positional=True, help="the shard cache files")
    name: str = option("sweep", help="the merged cache's name")
    cache_dir: str = cache_dir_option()
    force: bool = option(False, help="start the merged cache afresh")

    def __post_init__(self) -> None:
        check_name(self.name)
