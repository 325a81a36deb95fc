"""A claim with this cache's numbers and its verdict: what :mod:`tying.cache.claims` and
:mod:`tying.cache.mechanism_claims` return and every view draws."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Claim:
    key: str
    statement: str  # the paper's claim, one line
    verdict: str  # one of tying.cache.verdicts.VERDICTS
    ours: str = ""  # this cache's numbers, e.g. "O→T 0.875 vs I→T 0.501 (mean of 3 seeds)"
    paper: str = ""  # the paper's numbers beside them, where it has some
    note: str = ""  # what the numbers are, how the verdict was decided, or which cache holds them
    needs: str = ""  # the cache kind that holds the data ("toylab", "published", "sweep")
    n_runs: int = 0  # the runs the verdict was decided over (seeds; released models for the published claim)

    @property
    def headline(self) -> str:
        """The large line: the numbers and the verdict."""
        return f"{self.ours}: {self.verdict}" if self.ours else self.verdict

    def as_dict(self) -> dict[str, str]:
        return {"key": self.key, "statement": self.statement, "verdict": self.verdict, "ours": self.ours,
                "paper": self.paper, "note": self.note, "headline": self.headline, "n_runs": self.n_runs}
