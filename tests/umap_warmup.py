"""Compiles umap-learn's numba kernels into numba's disk cache at the lowest CPU priority; started by
tests/conftest.py (:func:`tests.conftest.start_umap_warmup`) when an xdist run holds the UMAP group.

On a fresh install (CI) the first process that fits UMAP compiles about 40 s of a core of numba code:
pynndescent's kernels at ``import umap`` and umap-learn's at the first fit, all of it kept on disk
(``tying.analysis.umap_fit._kernels_on_disk``). This process does that while the browser tests leave a
core idle (Linux's SCHED_IDLE: it runs only on a core nothing else wants), so that the worker of the UMAP
group later loads the kernels instead of compiling them. Where it has not finished by then, that worker
compiles what is missing itself, as it did before; nothing waits on this process.

Usage: python -m tests.umap_warmup
"""

from __future__ import annotations

import os


def lowest_priority() -> None:
    """This process on a core only when no other process wants it (SCHED_IDLE), else at nice 19."""
    try:
        os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
    except (AttributeError, OSError):
        os.nice(19)


def small_fits() -> None:
    """An aligned fit of two views and a single-view fit, of 80 random rows each: every kernel a fit of
    ``tying.analysis.umap_fit`` compiles (their signatures do not depend on the sizes)."""
    import numpy as np

    from tying.analysis.umap_fit import embed

    rng = np.random.default_rng(0)
    views = [rng.standard_normal((80, 12)).astype(np.float32) for _ in range(2)]
    for fitted in (views, views[:1]):  # AlignedUMAP, then UMAP
        maps = embed(fitted, n_neighbors=10, min_dist=0.1, seed=0, n_epochs=20)
        assert all(m.shape == (80, 2) and np.isfinite(m).all() for m in maps)


def main() -> None:
    lowest_priority()
    small_fits()


if __name__ == "__main__":
    main()
