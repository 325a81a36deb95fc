"""The generated parts of the docs: the option tables of docs/commands.md, made from the config
dataclasses (the same source as ``--help``), and the analyses' tables in docs/cache.md, made from
the registry (tying/registry.py), and the blocks of numbers in the docs made from the shipped
caches (``<!-- numbers: <name> -->`` ... ``<!-- /numbers -->``: no sentence types a number a cache
holds).

``python -m precompute.readme --markdown`` prints every command's table; ``--write`` replaces the
generated blocks of docs/commands.md (``<!-- options: <command> -->`` ... ``<!-- /options -->``)
of docs/cache.md (``<!-- tables: analyses -->`` ... ``<!-- /tables -->``) and the README's page
table (``<!-- pages -->`` ... ``<!-- /pages -->``); ``--write FILE``
the option blocks of another file. tests/test_docs.py fails when a block differs from what this
makes. (The module keeps its name from when the tables lived in the README.)
"""

from __future__ import annotations

import argparse
import functools
import re
import sys
from pathlib import Path

from explorer.render import pages
from precompute.cli import COMMANDS
from precompute.options import show_default, specs
from tying import registry

DOCS = Path(__file__).resolve().parent.parent / "docs" / "commands.md"  # the file that holds the tables
CACHE_DOCS = DOCS.with_name("cache.md")  # the cache schema, whose analyses' tables are generated
TABLES_BLOCK = re.compile(r"(<!-- tables: analyses -->\n)(.*?)(<!-- /tables -->)", flags=re.S)


def analysis_tables() -> str:
    """The rows of docs/cache.md's schema table for every analysis of the registry: | table | columns | what |."""
    rows = ["| table | columns | what |", "|---|---|---|"]
    for analysis in registry.ANALYSES:
        for table, body in analysis.tables.items():
            columns = ", ".join(re.findall(r"^\s*(\w+)\s+[A-Z]", body, flags=re.M))
            rows.append(f"| `{table}` | {columns} | {analysis.about.get(table, '')} (stage `{analysis.name}`) |")
    return "\n".join(rows)


README = DOCS.parents[1] / "README.md"
PAGES_BLOCK = re.compile(r"(<!-- pages -->\n)(.*?)(<!-- /pages -->)", flags=re.S)


def page_table(app_doc: str) -> str:
    """The README's table of the app's pages, from the registry; a page links to its section of
    docs/app.md when that has one."""
    headings = {re.sub(r"[^\w -]", "", h).strip().lower().replace(" ", "-")
                for h in re.findall(r"^## (.+)$", app_doc, flags=re.M)}
    rows = ["| page | what it shows |", "|---|---|"]
    for page in pages.PAGES:
        anchor = page.title.lower().replace(" ", "-")
        name = f"[{page.title}](docs/app.md#{anchor})" if anchor in headings else page.title
        rows.append(f"| {name} | {page.about} |")
    return "\n".join(rows)


def update_readme_pages(text: str) -> str:
    """The README with its page table made from the registry."""
    table = page_table((DOCS.with_name("app.md")).read_text())
    return PAGES_BLOCK.sub(lambda m: f"{m.group(1)}{table}\n{m.group(3)}", text)


def update_cache_doc(text: str) -> str:
    """docs/cache.md with its generated block replaced by the registry's tables."""
    return TABLES_BLOCK.sub(lambda m: f"{m.group(1)}{analysis_tables()}\n{m.group(3)}", text)


NUMBERS_BLOCK = re.compile(r"(<!-- numbers: ([\w-]+) -->\n)(.*?)(<!-- /numbers -->)", flags=re.S)
"""A block of numbers made from a shipped cache (``<!-- numbers: <name> -->``, :data:`NUMBERS`)."""

SHIPPED = DOCS.parents[1] / "cache"


@functools.lru_cache(maxsize=8)  # one summary per shipped cache for every block of every document
def _shipped_summary(name: str):
    from tying.cache.store import open_cache
    from tying.cache.summary import summarize

    con = open_cache(SHIPPED / f"{name}.duckdb")
    try:
        return summarize(con)
    finally:
        con.close()


def regime_numbers() -> str:
    """The shipped demo's regime table: shared start, independent twins, the ceiling (mean [95%
    interval] over its seeds)."""
    from tying.cache.regime import regime_table, seeds

    s = _shipped_summary("demo")
    rows = regime_table(s)
    if not rows:
        return "(the shipped demo has no per-seed regime numbers)"
    heads = list(rows[0])
    lines = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    lines += ["| " + " | ".join(r[h] for h in heads) + " |" for r in rows]
    return "\n".join(lines) + (f"\n\nMean [95% interval] over the shipped demo's {seeds(s)} seeds "
                               "(`cache/demo.duckdb`, `seed_metrics`); linear maps fitted on every token (in-sample) "
                               "or on 80% and scored on the rest (held-out); spectral distance: lower is more alike.")


def share_numbers() -> str:
    """The shipped demo's early output share, with the authors' proxy and with the exact input norm."""
    from tying.cache.regime import interval

    s = _shipped_summary("demo")
    proxy, exact = interval(s, "output share early (proxy input)"), interval(s, "output share early")
    if proxy is None or exact is None:
        return "(the shipped demo has no output share)"
    return (f"The shipped demo's early output share: {proxy[0]:.3f} with the authors' input proxy and "
            f"{exact[0]:.3f} with the exact input norm (means over its {proxy[3]} seeds).")


def cka_numbers() -> str:
    """The shipped demo's CKA of seed 0's matrices, with the ceiling."""
    s = _shipped_summary("demo")
    cka = s.analysis("cka") or {}
    if not cka:
        return "(the shipped demo has no CKA)"
    return ("On the shipped toy lab (seed 0's matrices): " +
            ", ".join(f"{pair} {v['cka']:.3f}" for pair, v in sorted(cka.items())) + ".")


def _markdown(df) -> str:
    heads = [str(c) for c in df.columns]
    rows = ["| " + " | ".join(heads) + " |", "|" + "---|" * len(heads)]
    return "\n".join(rows + ["| " + " | ".join(str(v) for v in r) + " |" for r in df.itertuples(index=False)])


def _claim_lines(s, keys) -> str:
    from tying.cache.claims import claims

    got = claims(s)
    return "\n".join(f"* `{k}` (**{got[k].verdict}**): {got[k].ours}" for k in keys)


def mechanism_numbers() -> str:
    """The shipped mechanism lab: each arm's effect toward I and away from O against the null band,
    every arm's bias and loss, the twins, and the claims as decided."""
    from explorer.render import mechanism as R
    from tying.cache.mechanism_claims import IDS

    s = _shipped_summary("mechanism")
    if not len(R.runs(s)):
        return "(the shipped mechanism lab has no runs)"
    arms = R.arm_table(s)[["arm", "seeds", "bias O→T − I→T", "bias T~O − T~I", "T·O raw-row cosine",
                           "eval loss (nats)", "peak lr"]]
    return ("Each arm's effect against the baseline's T of the same seed (mean [95% interval] over seeds; * beyond "
            "the null arm's band, the last row):\n\n" + _markdown(R.effects_table(s)) + "\n\nEvery arm:\n\n"
            + _markdown(arms) + "\n\n" + R.untied_line(s) + "\n\nThe claims as decided from these "
            "runs:\n\n" + _claim_lines(s, IDS))


def sweep_numbers() -> str:
    """The shipped sweep: per width the gap against the matched arm, its learning-rate band, the
    FLOPs per token, T's raw-row cosine with O, and the two claims as decided."""
    import numpy as np
    import pandas as pd

    from tying.cache.sweep_claims import IDS, gap_bands, undertrained_widths

    s = _shipped_summary("sweep")
    if not s.sweep:
        return "(the shipped sweep has no cells)"
    bands, slow = gap_bands(s, "tied_matched"), set(undertrained_widths(s.sweep_cells or []))
    rows = []
    for c in s.sweep_cells or []:
        key = (c["vocab_size"], c["d_model"])
        gap, half, band = c.get("loss_gap_matched"), c.get("loss_gap_matched_half"), bands.get(key)
        rows.append({"d_model": c["d_model"], "seeds": c["n"],
                     "untied − matched": f"{gap:+.3f} ± {half:.3f}" if half is not None else f"{gap:+.3f}",
                     "with a rate step": f"{gap + band['low']:+.3f} to {gap + band['high']:+.3f}" if band else "—",
                     "bigram": f"{c['bigram_loss']:.3f}" if c.get("bigram_loss") is not None else "—",
                     "undertrained": "yes" if key in slow else "no",
                     "MFLOPs/token twins, matched": (f"{c['flops_tied'] / 1e6:.2f}, {c['flops_tied_matched'] / 1e6:.2f}"
                                                     if c.get("flops_tied") is not None else "—"),
                     "T·O raw-row cosine": (f"{c['identity_raw_o_t']:.3f}" if c.get("identity_raw_o_t") is not None
                                            and np.isfinite(c["identity_raw_o_t"]) else "—")})
    return ("Per width (mean ± 95% half-width over seeds; the band: the gap moved by one learning-rate step of "
            "either arm, from the probes):\n\n" + _markdown(pd.DataFrame(rows)) + "\n\nThe claims as decided:\n\n"
            + _claim_lines(s, IDS))


NUMBERS = {"demo-regime": regime_numbers, "demo-share": share_numbers, "demo-cka": cka_numbers,
           "mechanism": mechanism_numbers, "sweep": sweep_numbers}
"""Every generated block of numbers, by name."""


def update_numbers(text: str) -> str:
    """A document with every numbers block made anew from the shipped caches."""
    made: dict[str, str] = {}

    def fill(m) -> str:
        name = m.group(2)
        if name not in made:
            made[name] = NUMBERS[name]()
        return f"{m.group(1)}{made[name]}\n{m.group(4)}"

    return NUMBERS_BLOCK.sub(fill, text)


NUMBERED_DOCS = (README, *sorted(DOCS.parent.glob("*.md")))
"""The documents whose numbers blocks ``--write`` refreshes."""


def markdown(cls: type) -> str:
    """The option table of a config: | option | default | meaning |."""
    rows = ["| option | default | meaning |", "|---|---|---|"]
    for s in specs(cls):
        name = f"`<{s.flag}>`" if s.positional else f"`{s.flag}`"
        default = "required" if s.required else show_default(s, markdown=True)
        rows.append(f"| {name} | {default} | {s.help.replace('|', '&#124;')} |".replace("|  |", "| |"))
    return "\n".join(rows)


BLOCK = re.compile(r"(<!-- options: ([\w-]+) -->\n)(.*?)(<!-- /options -->)", flags=re.S)


def readme_blocks(text: str) -> dict[str, str]:
    """{command: table} of the generated blocks of a document (docs/commands.md)."""
    return {m.group(2): m.group(3).strip() for m in BLOCK.finditer(text)}


def tables() -> dict[str, str]:
    """{command: its option table}, for every command."""
    return {name: markdown(command.config) for name, command in COMMANDS.items()}


def update_readme(text: str) -> str:
    """The document with every generated block replaced by its command's table."""
    made = tables()
    return BLOCK.sub(lambda m: f"{m.group(1)}{made[m.group(2)]}\n{m.group(4)}", text)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m precompute.readme",
                                description="The option tables of every command, from the config dataclasses.")
    p.add_argument("--markdown", action="store_true", help="print every command's table")
    p.add_argument("--write", metavar="FILE", nargs="?", const=str(DOCS),
                   help=f"replace the generated blocks of this file (default: {DOCS.relative_to(DOCS.parents[1])})")
    args = p.parse_args(argv)
    if args.write:
        path = Path(args.write)
        try:
            text = path.read_text()
        except OSError as e:
            print(f"error: cannot read {path}: {e.strerror or e}", file=sys.stderr)
            return 2
        found, made = readme_blocks(text), tables()
        unknown = sorted(set(found) - set(made))
        if not found or unknown:
            why = f"tables of no command: {', '.join(unknown)}" if unknown else "no generated blocks"
            print(f"error: {path} holds {why}; nothing written", file=sys.stderr)
            return 2
        path.write_text(update_readme(text))
        if path.resolve() == DOCS.resolve():
            CACHE_DOCS.write_text(update_cache_doc(CACHE_DOCS.read_text()))
            README.write_text(update_readme_pages(README.read_text()))
            for doc in NUMBERED_DOCS:
                text = doc.read_text()
                if NUMBERS_BLOCK.search(text):
                    doc.write_text(update_numbers(text))
        covered = {COMMANDS[name].config for name in found}  # `lens` shares `pair`'s options and table
        missing = [name for name, command in COMMANDS.items() if command.config not in covered]
        if missing:
            print(f"error: {path} has no table of {', '.join(missing)}: add "
                  f"'<!-- options: <command> -->' and '<!-- /options -->' where it belongs", file=sys.stderr)
            return 1
    if args.markdown or not args.write:
        print("\n\n".join(f"Options of `{name}`:\n\n{table}" for name, table in tables().items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
