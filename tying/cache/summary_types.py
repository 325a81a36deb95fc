"""The typed cache summary: :func:`tying.cache.summary.summarize` returns a :class:`Summary`.

One attribute per section of ``python -m precompute summary --json``; the sections whose keys
are data (comparisons, pairs, runs, metrics, sweep rows) stay dicts (the type aliases below).
The sections an analysis of the registry adds (its ``summary`` hook, under its name: umap, lens,
cka, ...) live in :attr:`Summary.analyses`, read with :meth:`Summary.analysis`, so a new analysis
needs no new attribute. :meth:`Summary.to_json` gives the JSON the CLI prints (same keys and
nesting as before the summary was typed) and :meth:`Summary.from_json` reads it back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from tying import registry
from tying.cache import reference

Models = dict[str, dict[str, Any]]
"""{role ("tied", "untied"): the models table's row (``files``, ``fingerprint`` decoded)}."""
Alignment = dict[str, dict[str, dict[str, Any]]]
"""{comparison: {method: {split: mean (None where not applicable), "note": why not}}}."""
Overlap = dict[str, dict[str, float]]
"""{pair: {str(k): mean overlap@k}}."""
ByPair = dict[str, Any]
"""{pair ("T~O", ...): a number or None}."""
Runs = dict[str, dict[str, Any]]
"""{run: {"variant", "seed", "input_grad_scale", "steps", "final_loss", "eval_loss", "seconds"}}."""
Provenance = dict[str, dict[str, Any]]
"""{run: the output share of its gradient log (early, overall, ..., ``beside_paper``)}."""
Evolution = dict[str, dict[str, dict[str, list]]]
"""{run: {matrix: {"steps": [...], "cos_init": [...]}}}."""
Table2 = dict[str, dict[str, dict[str, Any]]]
"""{method: {run: {"input_grad_scale", target: mean cosine}}}."""
Seeds = dict[str, dict[str, Any]]
"""{metric: {"n", "mean", "std"}}."""
SeedValues = dict[str, dict[str, float | None]]
"""{metric: {str(seed): value}}."""
Directions = dict[str, dict[str, Any]]
"""{claim: {"seeds", "holds", "all"}}."""
Rows = list[dict[str, Any]]
"""Sweep rows (one per cell and seed) or cells (one per grid point)."""


@dataclass(frozen=True)
class PaperReference:
    """The paper's figures for a preset (quoted, never computed), see :func:`paper_reference`."""

    preset: str | None = None
    table1: dict[str, Any] | None = None
    table1_match: str = "strings"
    table5: dict[str, Any] | None = None
    tuned_lens_kl: dict[str, Any] | None = None
    tuned_lens_note: str | None = None
    output_share: dict[str, Any] | None = None
    table2: dict[str, Any] | None = None
    table2_method: str | None = None
    table6: dict[str, Any] | None = None
    evolution: Any = None
    beside_toylab: bool = False  # the olmo figures set beside a toy lab's (in the JSON only when true)

    def to_json(self) -> dict[str, Any]:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        if not self.beside_toylab:
            del out["beside_toylab"]
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PaperReference:
        _check_keys(cls, d, "paper")
        return cls(**d)


def paper_reference(preset: str) -> dict[str, Any]:
    """The paper's figures for a preset (quoted, never computed), as the summary carries them."""
    return {
        "preset": preset,
        "table1": reference.TABLE1.get(preset),
        "table1_match": reference.TABLE1_MATCH.get(preset, "strings"),
        "table5": reference.TABLE5.get(preset),
        "tuned_lens_kl": reference.TUNED_LENS_KL.get(preset),
        "tuned_lens_note": reference.LENS_INDEXING_NOTE if preset in reference.TUNED_LENS_KL else None,
        "output_share": reference.OUTPUT_SHARE,
        "table2": {f"{k:g}": v for k, v in reference.TABLE2.items()},
        "table2_method": reference.TABLE2_METHOD,
        "table6": {f"{k:g}": v for k, v in reference.TABLE6.items()},
        "evolution": reference.EVOLUTION,
    }


EARLY_LAYERS = 2  # "early" hidden states for the KL gap: the input embedding and the first block

ALWAYS = ("name", "kind", "schema_version", "models", "stages", "vocabulary", "alignment", "overlap",
          "overlap_at_10", "spectral", "spectral_params")
"""The sections every summary's JSON has (the others only where the cache holds them)."""


@dataclass(frozen=True)
class Summary:
    """Every headline number of a cache (strict JSON values: no NaN)."""

    name: str | None = None
    kind: str | None = None  # "pair", "toylab", "provenance", "evolution", "published", "sweep", "mechanism"
    schema_version: int = 0
    models: Models = field(default_factory=dict)
    stages: dict[str, dict[str, Any]] = field(default_factory=dict)  # finished stages: {stage: params, ...}
    vocabulary: dict[str, Any] = field(default_factory=dict)
    alignment: Alignment = field(default_factory=dict)
    overlap: Overlap = field(default_factory=dict)
    overlap_at_10: ByPair = field(default_factory=dict)
    spectral: ByPair = field(default_factory=dict)
    spectral_params: dict[str, Any] = field(default_factory=dict)
    analyses: dict[str, Any] = field(default_factory=dict)  # {analysis name: what its summary hook returned}
    # training (toy lab, provenance, evolution, published caches); None where the cache has no runs
    runs: Runs | None = None
    gradient_provenance: Provenance | None = None
    evolution: Evolution | None = None
    table2: Table2 | None = None
    seeds: Seeds | None = None
    seed_values: SeedValues | None = None
    directions: Directions | None = None
    # a width sweep
    sweep: Rows | None = None
    sweep_cells: Rows | None = None
    sweep_probes: Rows | None = None  # the learning-rate probes (lr_probe): the gap claim's band
    sweep_settings: dict[str, Any] | None = None
    # the mechanism lab: one row per run (arm and seed), the bias over training, the SGD probes
    mechanism: Rows | None = None
    mechanism_curves: Rows | None = None
    mechanism_probes: Rows | None = None
    mechanism_settings: dict[str, Any] | None = None
    paper: PaperReference | None = None
    scale: dict[str, Any] | None = None  # a toy lab's size against the paper's ("line", "n_params", ...)
    twins: str | None = None  # how trained twins were started: "independent" or "shared start" (None: not trained here)
    overlap_context: dict[str, Any] | None = None  # why a toy lab's overlap@k sits below the paper's
    sources: list[dict[str, Any]] | None = None  # where a published cache's files come from

    def analysis(self, name: str) -> Any:
        """What the registry's analysis ``name`` added to the summary (None where it added nothing)."""
        return self.analyses.get(name)

    def to_json(self) -> dict[str, Any]:
        """The summary as ``summary --json`` prints it (without its ``claims``)."""
        out: dict[str, Any] = {}
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "analyses":
                out.update(v)
            elif f.name == "paper":
                if v is not None:
                    out["paper"] = v.to_json()
            elif f.name in ALWAYS or v is not None:
                out[f.name] = v
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Summary:
        """A summary from its JSON (:meth:`to_json`'s dict; a key that is neither a section nor an
        analysis of the registry is an error)."""
        names = {f.name for f in fields(cls)} - {"analyses"}
        analyses = set(registry.BY_NAME)
        unknown = sorted(set(d) - names - analyses)
        if unknown:
            raise ValueError(f"unknown summary sections: {', '.join(unknown)}")
        kw = {k: v for k, v in d.items() if k in names}
        if kw.get("paper") is not None and not isinstance(kw["paper"], PaperReference):
            kw["paper"] = PaperReference.from_json(kw["paper"])
        return cls(**kw, analyses={k: v for k, v in d.items() if k in analyses})


SHARED_START, INDEPENDENT = "shared start", "independent"
""":attr:`Summary.twins`: how a toy lab's, sweep's or mechanism lab's untied twin was trained, from
the tied model's initial weights and batch order, or from its own (the paper's regime)."""


def _check_keys(cls: type, d: dict[str, Any], what: str) -> None:
    unknown = sorted(set(d) - {f.name for f in fields(cls)})
    if unknown:
        raise ValueError(f"unknown {what} keys: {', '.join(unknown)}")


QUANTISED = ("Q", "IQ", "TQ")
"""GGUF's quantised storage types start so (Q8_0, Q4_1, IQ4_XS, TQ1_0); F16, BF16 and F32 do not."""


def model_label(model: dict) -> str:
    """A model as the pages name it, from its row of the summary: a hub id as it is; a local folder
    by its name; a GGUF file by its model name and how it is stored, "SmolLM2-135M-Instruct, 4-bit
    GGUF (Q4_1 blocks, Q8_0 embedding)" (the blocks' type from the file name's
    ``<model>.<type>.gguf``, the embedding's as read from the file), never the builder's path."""
    source = str(model.get("source") or "a tied model")
    name = source.rstrip("/").rsplit("/", 1)[-1] if source.startswith(("/", ".", "~")) or "\\" in source else source
    if not name.lower().endswith(".gguf"):
        return name
    stem = name[:-5]
    base, _, blocks = stem.rpartition(".")
    blocks = blocks if base and blocks.upper().startswith(QUANTISED) else ""
    emb = next((t for f in model.get("files") or [] for k, t in (f.get("gguf_types") or {}).items()
                if k == model.get("input_key")), None) or model.get("dtype")
    bits = next((c for c in blocks.upper().lstrip("IQT") if c.isdigit()), "")
    parts = [p for p in (f"{blocks} blocks" if blocks else "", f"{emb} embedding" if emb else "") if p]
    kind = f"{bits}-bit GGUF" if bits else "GGUF"
    return f"{base or stem}, {kind}" + (f" ({', '.join(parts)})" if parts else "")


LOCAL_PATH = re.compile(r"(?:/|~[/\\]|[A-Za-z]:[/\\]|\\\\)\S")
"""The start of a path on a machine's disk: absolute (POSIX or Windows, a UNC share) or the home
folder's."""


def is_local_path(value: Any) -> bool:
    """Whether ``value`` is a path on the disk of the machine that wrote it (absolute, or ``~/...``)."""
    return isinstance(value, str) and "\n" not in value and bool(LOCAL_PATH.match(value))


def path_name(path: str) -> str:
    """The last part of a path, its file or folder name (either slash)."""
    return re.split(r"[/\\]", path.rstrip("/\\"))[-1] or path


def without_local_paths(value: Any) -> Any:
    """``value`` (a cache's JSON: its meta, a stage's parameters, a summary) with every local path
    replaced by its file or folder name: what a cache recorded of the disk of the machine that
    built it, as anything published shows it."""
    if isinstance(value, dict):
        return {k: without_local_paths(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [without_local_paths(v) for v in value]
    return path_name(value) if is_local_path(value) else value


WEIGHT_SUFFIXES = (".gguf", ".safetensors", ".bin", ".pt", ".pth")


def is_local_source(source: str) -> bool:
    """Whether a model's recorded source is a file or folder (a path), not a hub id ("owner/name")."""
    return is_local_path(source) or source.startswith(".") or source.count("/") > 1 or "\\" in source \
        or source.lower().endswith(WEIGHT_SUFFIXES)


def _size(n: int) -> str:
    return f"{n / 1e9:.2f} GB" if n >= 1e9 else f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n:,} bytes"


def model_source(model: dict) -> str:
    """Where a model came from, as every published page says it: a hub id (``@revision``) as
    recorded; a local file or folder by its name (never the builder's path) with each weights
    file read from it, its size and sha256 where recorded:
    "SmolLM2-135M-Instruct.Q4_1.gguf (98.4 MB, sha256 b179c952...)"."""
    source = str(model.get("source") or "")
    if not is_local_source(source):
        return source + (f"@{model['revision']}" if model.get("revision") else "")
    name = path_name(source)
    files = [f for f in model.get("files") or [] if isinstance(f, dict) and f.get("name")
             and (f.get("sha256") or str(f["name"]).lower().endswith(WEIGHT_SUFFIXES))]
    described = []
    for f in files:
        own = path_name(str(f["name"]))
        facts = ([own] if own != name else []) + ([_size(int(f["size"]))] if f.get("size") is not None else []) \
            + ([f"sha256 {f['sha256']}"] if f.get("sha256") else [])
        if facts:
            described.append(", ".join(facts))
    return name + (f" ({'; '.join(described)})" if described else "")


def stored_as(dtype: str | None) -> str:
    """How a model's matrix was stored, as the pages say it: "Q8_0, dequantised" for a GGUF
    quantisation type, else the dtype ("bfloat16")."""
    if not dtype:
        return ""
    return f"{dtype}, dequantised" if dtype.upper().startswith(QUANTISED) else dtype
