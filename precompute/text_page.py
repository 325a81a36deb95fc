"""The static site's text page, ``<cache>/text.html``: a visitor's own text through the toy lab's
tied and untied twins, layer by layer, computed in the browser.

The twins (Llama blocks, float32, a few MB each) and their tuned lenses go into the site as
script files of base64 (a browser refuses ``fetch()`` from ``file://``, a script tag it loads),
each under :data:`CHUNK` characters so no file nears the 10 MB a plain git push to a Space
takes; only text.html names them, so they load when that page opens. The forward pass, the
byte-level BPE and the lenses are ``assets/twins.js`` (tests/test_text_page.py holds it to
``precompute trajectory``'s rows); ``assets/text.js`` draws the page. A cache gets the page
when its two models are on this machine as Llama safetensors in float32 with a byte-level BPE
tokenizer and a tuned lens each: the toy lab's twins.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

CHUNK = 4_000_000
"""Characters of base64 per script file (3 MB of weights)."""

ROLES = ("tied", "untied")


def _llama_f32(folder: Path) -> bool:
    try:
        config = json.loads((folder / "config.json").read_text())
        tok = json.loads((folder / "tokenizer.json").read_text())
        with open(folder / "model.safetensors", "rb") as fh:  # its header only, not the weights
            header = json.loads(fh.read(int.from_bytes(fh.read(8), "little")))
    except (OSError, ValueError):
        return False
    return (config.get("model_type") == "llama" and (tok.get("model") or {}).get("type") == "BPE"
            and (tok.get("pre_tokenizer") or {}).get("type") == "ByteLevel" and not tok.get("normalizer")
            and all(v.get("dtype") == "F32" for k, v in header.items() if k != "__metadata__"))


def sources(ref) -> dict[str, tuple[Path, Path]] | None:
    """``{role: (model folder, tuned-lens file)}`` for both twins of the cache, or None when the
    cache cannot have a text page (a model missing here, not a float32 Llama, no tuned lens)."""
    from explorer.render import read
    from tying.cache.store import stage_params
    from tying.layout import lens_files, model_dirs
    from tying.lens import LensBudget

    stages = read.summary(ref).stages
    dirs = model_dirs(stage_params(stages, "load"), ref.path)
    budget = (stage_params(stages, "lens") or {}).get("budget")
    out = {}
    for role in ROLES:
        folder = dirs.get(role)
        if folder is None or not Path(folder).is_dir() or not _llama_f32(Path(folder)):
            return None
        lenses = lens_files(ref.path, role, LensBudget.recorded(budget, role))
        if not lenses or lenses[0].with_name(lenses[0].stem + ".parts").exists():  # twins.js reads one float32 file
            return None
        out[role] = (Path(folder), lenses[0])
    return out


def tokenizer_spec(tokenizer_json: Path) -> dict:
    """What twins.js's Tokenizer takes from a tokenizer.json: vocab, merges (pairs), special tokens."""
    t = json.loads(Path(tokenizer_json).read_text())
    merges = [m if isinstance(m, list) else m.split(" ") for m in t["model"]["merges"]]
    special = {a["content"]: a["id"] for a in t.get("added_tokens", []) if a.get("special")}
    return {"vocab": t["model"]["vocab"], "merges": merges, "special": special}


def _chunks(data: bytes) -> list[str]:
    text = base64.b64encode(data).decode("ascii")
    return [text[i:i + CHUNK] for i in range(0, len(text), CHUNK)] or [""]


def write(builder, c, js_data, found: dict[str, tuple[Path, Path]]) -> list[str]:
    """Write ``<cache>/text/*.js`` and ``<cache>/text.html`` for cache ``c`` through the site
    builder (precompute/site.py), from its :func:`sources`; the page's scripts."""
    folder = f"{c.folder}/text"
    scripts, setup = [], {"roles": {}, "context": None}
    for role, (model_dir, lens_file) in found.items():
        config = json.loads((model_dir / "config.json").read_text())
        setup["roles"][role] = {"config": config, "model": [], "lens": []}
        ctx = config.get("max_position_embeddings")
        setup["context"] = min(setup["context"] or ctx, ctx) if ctx else setup["context"]
        for what, path in (("model", model_dir / "model.safetensors"), ("lens", lens_file)):
            for i, part in enumerate(_chunks(path.read_bytes())):
                name = f"{role}-{what}-{i}.js"
                builder.write(f"{folder}/{name}", f"window.TWINS_DATA.push([{js_data(role)}, {js_data(what)}, "
                                                  f"\"{part}\"]);\n")
                scripts.append(f"text/{name}")
    setup["tokenizer"] = tokenizer_spec(found["tied"][0] / "tokenizer.json")
    builder.write(f"{folder}/setup.js", f"window.TWINS_SETUP = {js_data(setup)};\nwindow.TWINS_DATA = [];\n")
    scripts = ["text/setup.js", *scripts, "../assets/twins.js", "../assets/text.js"]
    builder.page(f"{c.folder}/text.html", "text.html", current=f"{c.folder}/text.html", charts=False, c=c,
                 scripts=scripts)
    return scripts
