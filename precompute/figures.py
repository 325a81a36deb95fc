"""`precompute figures`: every figure and table a cache supports, as files (the figure pack).

A read-side renderer: it draws with the app's own chart builders and registry
(:mod:`explorer.render.figures`, through :mod:`explorer.render.pack`), so a file shows what the page shows;
tests/test_layers.py lists this module as the writer's one door into the app's code. The
app's sidebar offers the same pack as a zip.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path

from precompute.options import cache_dir_option, option
from precompute.report import resolve_cache
from tying.errors import UserError

FORMATS = ("svg", "pdf", "png")


@dataclass
class FiguresConfig:
    """What `precompute figures` does; checked when built."""

    cache: str = option(positional=True, help="a cache file (`cache/<name>.duckdb`) or a pair name in `--cache-dir`")
    cache_dir: str = cache_dir_option()
    out: str | None = option(None, shown="`figures/<cache name>`",
                             help="folder of the pack; an earlier pack there is replaced as a whole, a folder holding "
                                  "other files is refused")
    format: list[str] = option(list(FORMATS), help="image formats, comma-separated: any of `svg`, `pdf`, `png`")
    scale: float = option(2.0, help="PNG pixels per drawn pixel (2 stays sharp on a projector)")
    presentation: bool = option(False, help="large fonts and taller charts, as the app's presentation mode")

    def __post_init__(self) -> None:
        wrong = [f for f in self.format if f.lower() not in FORMATS]
        if wrong:
            raise UserError(f"--format: unknown format '{wrong[0]}'; choose from {', '.join(FORMATS)}")
        if not self.format:
            raise UserError(f"--format: give at least one of {', '.join(FORMATS)}")
        self.format = list(dict.fromkeys(f.lower() for f in self.format))
        if not self.scale > 0:
            raise UserError(f"--scale must be above 0, got {self.scale:g}")


def run_figures(cfg: FiguresConfig) -> None:
    from tqdm import tqdm

    from explorer.render import pack

    ref = pack.open_ref(resolve_cache(cfg.cache, cfg.cache_dir))
    out = Path(cfg.out) if cfg.out else Path("figures") / ref.name
    bar = None

    def progress(done: int, total: int, name: str) -> None:
        nonlocal bar
        if bar is None:
            bar = tqdm(total=total, unit="figure", file=sys.stderr, leave=False)
        bar.set_postfix_str(name)
        bar.update(1)

    try:
        manifest = pack.write_pack(ref, out, formats=tuple(cfg.format), scale=cfg.scale,
                                   presentation=cfg.presentation, progress=progress)
    finally:
        if bar is not None:
            bar.close()
    figures = len({f["figure"] for f in manifest["files"]})
    size = sum((out / f["file"]).stat().st_size for f in manifest["files"])
    print(f"wrote {len(manifest['files'])} files ({figures} figures and tables, {size / 2**20:.1f} MiB) and "
          f"{pack.MANIFEST} to {out}")
