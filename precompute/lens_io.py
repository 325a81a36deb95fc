"""``python -m precompute export-lens``: a cache's tuned lenses in the tuned-lens library's format.

``export-lens CACHE --out DIR`` writes ``DIR/tied`` and ``DIR/untied`` (one folder for a
one-model cache), each ``config.json`` + ``params.pt`` as the library's
``TunedLens.from_model_and_pretrained(model, "DIR/tied")`` reads them
(:mod:`tying.lens.interop`). The folder is written whole or not at all: into a temporary
folder beside ``DIR``, then renamed; an earlier export there is replaced, any other non-empty
folder is refused. The way back, a lens the library trained used in place of training one, is
``--lens-from DIR`` on ``pair`` and ``lens`` (:func:`lens_from`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from precompute.options import cache_dir_option, option
from tying.errors import UserError

ROLES = ("tied", "untied")


@dataclass
class ExportLensConfig:
    """What `precompute export-lens` does; checked when built."""

    cache: str = option(positional=True, help="a cache file (`cache/<name>.duckdb`) or a pair name in `--cache-dir`")
    out: str = option(help="the folder to write: `<out>/tied` and `<out>/untied`, each config.json + params.pt")
    cache_dir: str = cache_dir_option()
    trust_remote_code: bool = option(False, help="allow model code from the model's folder (off by default)")


def _is_earlier_export(folder: Path) -> bool:
    from tying.lens.interop import is_lens_folder

    entries = list(folder.iterdir())
    return all(e.is_dir() and e.name in ROLES and is_lens_folder(e) for e in entries)


def run_export_lens(cfg: ExportLensConfig) -> None:
    from precompute.report import resolve_cache
    from precompute.trajectory import _stage_params, fitting_lens
    from tying.cache.writer import folder_written
    from tying.layout import lens_files, model_dirs
    from tying.lens.interop import write_folder
    from tying.lens.parts import find_lens_parts
    from tying.loading.causal_lm import load_causal_lm

    cache_path = resolve_cache(cfg.cache, cfg.cache_dir)
    if not cache_path.is_file():
        raise UserError(f"no cache at {cache_path}")
    out = Path(cfg.out)
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not _is_earlier_export(out))):
        raise UserError(f"{out} exists and is not an earlier lens export; give an empty or new folder")
    load, lens_stage = _stage_params(cache_path)
    train = f"python -m precompute lens {cache_path.stem} (or demo / pair without --skip lens)"
    if not lens_stage or not any(lens_files(cache_path, role) for role in ROLES):
        raise UserError(f"{cache_path.name} holds no trained tuned lens: {train} trains them")
    dirs = model_dirs(load, cache_path)
    if not dirs:
        raise UserError(f"the models of {cache_path.name} are not on this machine; the export needs them (the "
                        "library's config names the model and the hash of its unembedding)")
    with folder_written(out) as tmp:
        for role, folder in dirs.items():
            model, _ = load_causal_lm(str(folder), "cpu", trust_remote_code=cfg.trust_remote_code)
            parts = find_lens_parts(model)
            lens, _ = fitting_lens(cache_path, role, parts, lens_stage)
            if lens is None:
                raise UserError(f"no tuned lens of {cache_path.name}'s {role} model fits it: {train} trains them")
            write_folder(tmp / role, lens, parts, base_model=str(load.get(role) or folder),
                         revision=load.get(f"{role}_revision"))
            print(f"{role}: {lens.n_hidden - 1} translators of width {lens.d_model} -> {out / role}")
            del model
    print(f"load with: TunedLens.from_model_and_pretrained(model, \"{out / 'tied'}\") (tuned-lens 0.2.0)")


def lens_folder(folder: str | Path, role: str) -> Path | None:
    """The library lens folder for the ``role`` model in ``folder``: ``folder/role`` when it holds
    one per model (as ``export-lens`` writes), else ``folder`` itself for the tied model of a
    one-model run; None when there is none."""
    from tying.lens.interop import is_lens_folder

    folder = Path(folder)
    if is_lens_folder(folder / role):
        return folder / role
    return folder if role == "tied" and is_lens_folder(folder) else None


def lens_from(folder: str | Path, role: str, parts, model_name: str):
    """The tuned lens for the ``role`` model read from a library lens folder: ``folder/role``
    when ``folder`` holds one per model (as ``export-lens`` writes), else ``folder`` itself
    for the tied model of a one-model run. UserError (one line) when there is none or it does
    not fit."""
    from tying.lens.interop import read_folder

    folder = Path(folder)
    if not folder.is_dir():
        raise UserError(f"--lens-from {folder}: no such folder")
    chosen = lens_folder(folder, role)
    if chosen is None:
        raise UserError(f"--lens-from {folder}: no tuned-lens folder for the {role} model (expected "
                        f"{folder / role}/config.json and params.pt)")
    return read_folder(chosen, parts, model_name), chosen
