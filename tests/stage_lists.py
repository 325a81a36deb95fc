"""Stage lists the tests pass to `precompute pair --skip`, made from the registry's needs, so that
a new analysis lands in the right ones with no test edited."""

from tying import registry

RUNS_A_MODEL = tuple(a for a in registry.OPTIONAL_STAGES if "model" in registry.BY_NAME[a].needs)
"""The optional pair stages that run a model (the lens, and whatever reads through it)."""

MATRICES_ONLY = ",".join(("umap", *RUNS_A_MODEL))
"""``--skip`` for a test of the matrices' stages: UMAP (seconds of numba) and every stage that runs a model."""

SKIPPED = {"umap", *RUNS_A_MODEL}
"""The stages :data:`MATRICES_ONLY` leaves out."""
