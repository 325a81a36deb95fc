"""A tuned lens too large for one shippable file: float16, in parts of at most ``max_bytes`` each.

A lens whose float32 file would pass :data:`MAX_FILE_BYTES` (10 MB: what a plain git push to a
Hugging Face Space takes per file, and what GitHub takes without warning) is saved by
:func:`tying.lens.files.save_lens` in float16 (float32 where a value is beyond float16's
range), its tensors packed in order into files of at most ``max_bytes``:

- ``<role>-<key>.safetensors``: the header (format, fingerprint, shapes, ``dtype``, the budget
  when the caller gave one) and the first translators; its ``parts`` entry lists the other
  files with their sha256;
- ``<role>-<key>.parts/<i>.safetensors``, i = 1, 2, ...: the rest.

A tensor larger than one file on its own is cut into row blocks (``<name>@<first row>``). The
folder is not named ``*.safetensors``, so whoever lists a cache's lenses by that suffix (the
cache's layout) sees one file per lens. Reading (:func:`read_parts`) checks every part's
sha256 and gives the tensors back whole, in float32: the saved values exactly, the float16
rounding aside. SmolLM2-135M's lens (31 translators of 576 x 576 and a bias) is 41 MB in
float32 and 20.6 MB in float16: three files under 10 MB.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import torch

from tying.cache.writer import atomic_write

MAX_FILE_BYTES = 10_000_000
"""The largest lens file saved (10 MB, decimal): a larger lens is saved in float16 parts."""

HEADER_MARGIN = 256 * 1024
"""Bytes kept free in each part for its safetensors header (tensor names, offsets, metadata)."""

SEP = "@"


def parts_dir(path: str | Path) -> Path:
    """The folder of the parts after the first of a lens saved at ``path``."""
    path = Path(path)
    return path.with_name(path.stem + ".parts")


def tensor_bytes(tensors: dict[str, torch.Tensor]) -> int:
    return sum(t.numel() * t.element_size() for t in tensors.values())


def _narrow(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The tensors in float16, or float32 when a value is beyond float16's range (it would be inf)."""
    largest = torch.finfo(torch.float16).max
    if all(not t.numel() or float(t.abs().max()) <= largest for t in tensors.values()):
        return {k: t.to(torch.float16).contiguous() for k, t in tensors.items()}
    return {k: t.to(torch.float32).contiguous() for k, t in tensors.items()}


def _pieces(tensors: dict[str, torch.Tensor], room: int) -> list[tuple[str, torch.Tensor]]:
    """(key, tensor) in order, a tensor larger than ``room`` bytes cut into row blocks ``name@row``."""
    out = []
    for name, t in tensors.items():
        if SEP in name:
            raise ValueError(f"a lens tensor name with '{SEP}': {name}")
        size = t.numel() * t.element_size()
        if size <= room or t.dim() == 0:
            out.append((name, t))
            continue
        row_bytes = max(1, size // max(1, t.shape[0]))
        rows = max(1, room // row_bytes)
        for start in range(0, t.shape[0], rows):
            out.append((f"{name}{SEP}{start}", t[start:start + rows].contiguous()))
    return out


def pack(tensors: dict[str, torch.Tensor], max_bytes: int = MAX_FILE_BYTES) -> list[dict[str, torch.Tensor]]:
    """The tensors (already in their saved dtype) in order, in groups of at most
    ``max_bytes - HEADER_MARGIN`` bytes of data each."""
    room = int(max_bytes) - HEADER_MARGIN
    if room < 1:
        raise ValueError(f"lens files of {max_bytes} bytes leave no room beside their header")
    groups: list[dict[str, torch.Tensor]] = [{}]
    used = 0
    for key, t in _pieces(tensors, room):
        size = t.numel() * t.element_size()
        if groups[-1] and used + size > room:
            groups.append({})
            used = 0
        groups[-1][key] = t
        used += size
    return groups


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_parts(tensors: dict[str, torch.Tensor], path: str | Path, header: dict[str, str],
                max_bytes: int = MAX_FILE_BYTES) -> list[Path]:
    """Save float32 ``tensors`` at ``path`` as float16 parts of at most ``max_bytes`` each (see the
    module): the other parts first, the first file (with ``header`` and the parts' sha256) last,
    each written atomically; parts of an earlier save that are no longer named are removed.
    Returns the files written, the first one first."""
    from safetensors.torch import save_file

    path = Path(path)
    narrow = _narrow(tensors)
    groups = pack(narrow, max_bytes)
    folder = parts_dir(path)
    written, listed = [], []
    if len(groups) > 1:
        folder.mkdir(parents=True, exist_ok=True)
    for i, group in enumerate(groups[1:], start=1):
        part = folder / f"{i}.safetensors"
        atomic_write(part, lambda tmp, g=group, i=i: save_file(g, tmp, metadata={"format": header["format"],
                                                                                   "part": str(i)}))
        written.append(part)
        listed.append([f"{folder.name}/{part.name}", _sha256(part)])
    first = dict(header) | {"dtype": str(next(iter(narrow.values())).dtype).removeprefix("torch."),
                            "parts": json.dumps(listed)}
    atomic_write(path, lambda tmp: save_file(groups[0], tmp, metadata=first))
    if folder.is_dir():  # an earlier, larger save's leftovers
        keep = {p.name for p in written}
        for stale in folder.iterdir():
            if stale.name not in keep:
                stale.unlink() if stale.is_file() else shutil.rmtree(stale)
        if not keep:
            folder.rmdir()
    files = [path, *written]
    too_big = [f for f in files if f.stat().st_size > max_bytes]
    if too_big:
        raise ValueError(f"lens file {too_big[0]} has {too_big[0].stat().st_size:,} bytes, over {max_bytes:,}")
    return files


def clear_parts(path: str | Path) -> None:
    """Remove the parts of an earlier save at ``path`` (a lens now saved in one file)."""
    folder = parts_dir(path)
    if folder.is_dir():
        shutil.rmtree(folder)


def part_files(path: str | Path, header: dict) -> list[Path]:
    """Every file of the lens saved at ``path`` (the first, then its parts), from its ``header``."""
    path = Path(path)
    listed = json.loads(header.get("parts") or "[]")
    return [path, *(path.parent / name for name, _ in listed)]


def read_parts(path: str | Path, header: dict) -> dict[str, torch.Tensor]:
    """The float32 tensors of a lens saved by :func:`write_parts`, whole. ValueError when a part
    is missing or is not the one the first file names (its sha256)."""
    from safetensors.torch import load_file

    path = Path(path)
    try:
        listed = json.loads(header.get("parts") or "[]")
    except ValueError:
        raise ValueError(f"the lens at {path} names its parts unreadably") from None
    pieces = dict(load_file(str(path)))
    for name, sha in listed:
        part = path.parent / name
        if not part.is_file():
            raise ValueError(f"the lens at {path} misses its part {name}")
        if _sha256(part) != sha:
            raise ValueError(f"the lens at {path}: its part {name} is not the one saved with it (sha256 differs)")
        pieces.update(load_file(str(part)))
    blocks: dict[str, list[tuple[int, torch.Tensor]]] = {}
    for key, t in pieces.items():
        name, _, start = key.partition(SEP)
        blocks.setdefault(name, []).append((int(start or 0), t))
    return {name: (bs[0][1] if len(bs) == 1 else torch.cat([t for _, t in sorted(bs, key=lambda b: b[0])]))
            .to(torch.float32) for name, bs in blocks.items()}
