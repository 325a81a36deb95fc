"""The figure pack (`python -m precompute figures`, the app's zip): every file valid, at the
asked scale, listed in the manifest with the registry's caption; written whole or not at all."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shutil
import struct
import subprocess
import threading
import xml.etree.ElementTree as ET
import zipfile
from pathlib import Path

import pandas as pd
import pytest

from explorer import data
from explorer.render import figures, pack, provenance, typesetting
from explorer.render.formats import FORMATS, latex, tex_escape
from precompute.cli import main

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ROOT / "cache"


def _copy(tmp_path_factory, name: str) -> Path:
    """A copy of a shipped cache: nothing here touches the shipped file."""
    folder = tmp_path_factory.mktemp(f"cache-{name}")
    return Path(shutil.copy2(SHIPPED / f"{name}.duckdb", folder / f"{name}.duckdb"))


@pytest.fixture(scope="module")
def demo_cache(tmp_path_factory) -> Path:
    return _copy(tmp_path_factory, "demo")


@pytest.fixture(scope="module")
def sweep_cache(tmp_path_factory) -> Path:
    return _copy(tmp_path_factory, "sweep")


@pytest.fixture(scope="module")
def sweep_pack(tmp_path_factory, sweep_cache) -> Path:
    """The sweep cache's pack in every format, written through the command line."""
    out = tmp_path_factory.mktemp("packs") / "sweep"
    assert main(["figures", str(sweep_cache), "--out", str(out)]) == 0
    return out


def png_size(body: bytes) -> tuple[int, int]:
    assert body[:8] == b"\x89PNG\r\n\x1a\n" and body[12:16] == b"IHDR"
    return struct.unpack(">II", body[16:24])


def pdf_pages(body: bytes) -> int:
    """Page objects of a PDF (``/Type /Page``, not the ``/Pages`` tree); the files are written
    without object streams, so every object is in plain sight."""
    assert body.startswith(b"%PDF-") and b"/ObjStm" not in body
    return len(re.findall(rb"/Type\s*/Page(?![A-Za-z])", body))


def svg_width(body: bytes) -> float:
    root = ET.fromstring(body)
    assert root.tag.endswith("svg")
    return float(root.get("width"))


def check_pack(out: Path, cache: Path, formats=FORMATS, scale: float = 2.0) -> dict:
    """Every written file valid and listed in the manifest (and nothing else), captions the registry's."""
    manifest = json.loads((out / pack.MANIFEST).read_text())
    listed = [f["file"] for f in manifest["files"]]
    written = sorted(p.name for p in out.iterdir() if p.name != pack.MANIFEST)
    assert sorted(listed) == written and len(set(listed)) == len(listed)
    assert manifest["cache"] == cache.stem and manifest["commit"] == provenance.git_commit()
    assert manifest["created"] and manifest["formats"] == list(formats)
    expected = figures.available(data.CacheRef.of(cache))
    assert {f["figure"] for f in manifest["files"]} == {f.name for f in expected}
    for entry in manifest["files"]:
        fig = figures.BY_NAME[entry["figure"]]
        assert entry["caption"] == fig.caption and entry["caption"].strip()
        assert entry["title"] == fig.title
        assert entry["source"].startswith("Source: ") and manifest["commit"] in entry["source"]
        assert f"cache '{cache.stem}'" in entry["source"]
        assert entry["file"] == f"{fig.name}.{entry['format']}"
    for fig in expected:
        kinds = {f["format"] for f in manifest["files"] if f["figure"] == fig.name}
        assert kinds == set(formats) | ({"csv", "tex"} if fig.is_table else {"csv", "json"}), fig.name
        body = {fmt: (out / f"{fig.name}.{fmt}").read_bytes() for fmt in kinds}
        if "svg" in body:
            width = svg_width(body["svg"])
            assert b"<desc>" in body["svg"] and b"<title>" in body["svg"]
        if "pdf" in body:
            assert pdf_pages(body["pdf"]) == 1, fig.name
        if "png" in body:
            w, h = png_size(body["png"])
            assert w > 100 and h > 100
            if "svg" in body:
                assert abs(w - width * scale) <= 1, (fig.name, w, width)
        if "json" in body:
            spec = json.loads(body["json"])
            assert spec["usermeta"]["caption"] == fig.caption and "vconcat" in spec
            assert spec["vconcat"][0]["title"]["text"] == typesetting.drawable(fig.title)  # the heading on top
            assert contrast(spec["title"]["subtitleColor"], "#ffffff") >= 4.5  # the source line reads on white
        if "tex" in body:
            tex = body["tex"].decode()
            assert r"\begin{tabular}" in tex and r"\caption" in tex and f"tab:{fig.name}" in tex
        pd.read_csv(out / f"{fig.name}.csv")
    return manifest


def contrast(fg: str, bg: str) -> float:
    """WCAG 2's contrast ratio of two #rrggbb colours."""
    def luminance(colour: str) -> float:
        c = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
        r, g, b = (v / 12.92 if v <= 0.04045 else ((v + 0.055) / 1.055) ** 2.4 for v in c)
        return 0.2126 * r + 0.7152 * g + 0.0722 * b

    hi, lo = sorted((luminance(fg), luminance(bg)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)


def test_contrast_has_known_answers():
    assert contrast("#000000", "#ffffff") == pytest.approx(21.0)
    assert contrast("#777777", "#ffffff") == pytest.approx(4.48, abs=0.01)  # just short of AA
    assert contrast("#888888", "#ffffff") < 4.5  # the old source-line grey


def test_titles_carry_the_papers_numbering():
    """A figure named after the paper's figure or table ("figure1-...", "table5") is titled
    "Figure 1. ..." / "Table 5. ..."; no other figure claims a paper number."""
    for fig in figures.FIGURES:
        m = re.fullmatch(r"(figure|table)(\d+)(-.*)?", fig.name)
        if m:
            assert fig.title.startswith(f"{m.group(1).title()} {m.group(2)}. "), fig.title
        else:
            assert not re.match(r"(Figure|Table) \d", fig.title), fig.title


def legend_labels(svg: str) -> list[list[str]]:
    """Each legend's entry labels in a Vega SVG (its groups keep their roles as classes)."""
    out = []
    for part in svg.split('class="mark-group role-legend"')[1:]:
        labels = []
        for chunk in part.split('role-legend-label"')[1:]:
            labels += re.findall(r"<text[^>]*>([^<]*)</text>", chunk.split("</g>")[0])
        out.append(labels)
    return out


def shipped_charts(name: str):
    """``(figure, chart)`` of every figure the shipped cache ``name`` draws."""
    ref = data.CacheRef.of(SHIPPED / f"{name}.duckdb")
    for fig in figures.available(ref):
        chart, _ = fig.build(ref)
        if chart is not None:
            yield fig, chart


@pytest.mark.slow
@pytest.mark.parametrize("name", ["demo", "paper", "sweep", "mechanism"])
def test_no_figure_of_a_shipped_cache_draws_a_legend_of_one_entry(name):
    import vl_convert as vlc

    drawn = 0
    for fig, chart in shipped_charts(name):
        legends = legend_labels(vlc.vegalite_to_svg(typesetting.figure_spec(chart, "c", "s", presentation=False)))
        assert all(len(labels) > 1 for labels in legends), (fig.name, legends)
        drawn += len(legends)
    assert drawn > 0  # the check saw legends at all


@pytest.mark.slow
def test_the_sweep_pack_is_complete_and_valid(sweep_pack, sweep_cache):
    manifest = check_pack(sweep_pack, sweep_cache)
    assert {f["figure"] for f in manifest["files"]} == {"sweep-loss-gap", "sweep-bias", "table-sweep"}
    source = manifest["files"][0]["source"]
    assert "d_model=32/64/128/256" in source and "seed=0/1/2" in source  # the cells' parameters, briefly
    assert not list(sweep_pack.parent.glob(".*.tmp")) and not list(sweep_pack.parent.glob(".*.old"))


@pytest.mark.slow
def test_a_png_is_at_the_asked_scale(tmp_path, sweep_cache):
    ref = data.CacheRef.of(sweep_cache)
    widths = {}
    for scale in (1.0, 2.0):
        out = tmp_path / f"x{scale:g}"
        pack.write_pack(ref, out, formats=("png",), scale=scale)
        widths[scale] = png_size((out / "sweep-bias.png").read_bytes())
    (w1, h1), (w2, h2) = widths[1.0], widths[2.0]
    assert abs(w2 - 2 * w1) <= 1 and abs(h2 - 2 * h1) <= 1


@pytest.mark.parametrize("argv, says", [
    (["--format", "gif"], "unknown format 'gif'"),
    (["--format", "svg,jpeg"], "unknown format 'jpeg'"),
    (["--format", ""], "at least one"),
    (["--scale", "0"], "--scale must be above 0"),
    (["--scale", "x"], "expected a number"),
])
def test_a_bad_option_is_one_line_and_exit_2(tmp_path, capsys, sweep_cache, argv, says):
    out = tmp_path / "pack"
    assert main(["figures", str(sweep_cache), "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and says in err, err
    assert not out.exists()


def test_a_missing_cache_or_a_folder_of_other_files_is_refused(tmp_path, capsys, sweep_cache):
    assert main(["figures", "no-such-cache", "--cache-dir", str(tmp_path)]) == 2
    assert "no cache at" in capsys.readouterr().err
    other = tmp_path / "notes"
    other.mkdir()
    (other / "mine.txt").write_text("keep me")
    assert main(["figures", str(sweep_cache), "--out", str(other), "--format", "svg"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "not a figure pack" in err
    assert [p.name for p in other.iterdir()] == ["mine.txt"]


def _failing_last(monkeypatch):
    """The registry with its last available entry's builder raising."""
    real = figures.available

    def boom(ref):
        raise RuntimeError("a builder broke")

    def available(ref):
        entries = real(ref)
        return entries[:-1] + [dataclasses.replace(entries[-1], build=boom)]

    monkeypatch.setattr(figures, "available", available)


@pytest.mark.slow
def test_a_failing_figure_leaves_no_pack_and_an_earlier_pack_unchanged(tmp_path, monkeypatch, sweep_cache):
    ref = data.CacheRef.of(sweep_cache)
    fresh, earlier = tmp_path / "fresh", tmp_path / "earlier"
    pack.write_pack(ref, earlier, formats=("svg",))
    before = {p.name: p.read_bytes() for p in earlier.iterdir()}
    _failing_last(monkeypatch)
    for out in (fresh, earlier):
        with pytest.raises(RuntimeError, match="a builder broke") as info:
            pack.write_pack(ref, out, formats=("svg", "png"))
        assert any("while drawing" in note for note in info.value.__notes__)
    assert not fresh.exists()
    assert {p.name: p.read_bytes() for p in earlier.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier"]  # no temporary folder left behind


@pytest.mark.slow
def test_a_rerun_replaces_the_pack_whole(tmp_path, sweep_cache):
    ref = data.CacheRef.of(sweep_cache)
    out = tmp_path / "pack"
    pack.write_pack(ref, out, formats=("svg", "png"))
    pack.write_pack(ref, out, formats=("pdf",))
    assert not list(out.glob("*.svg")) and not list(out.glob("*.png")) and list(out.glob("*.pdf"))
    check_pack(out, sweep_cache, formats=("pdf",))


def test_the_zip_holds_the_same_pack(sweep_cache):
    ref = data.CacheRef.of(sweep_cache)
    got = {}
    worker = threading.Thread(target=lambda: got.update(body=pack.pack_zip(ref, formats=("svg",))))
    worker.start()  # the app calls it from a download's own thread, outside a script run
    worker.join()
    with zipfile.ZipFile(io.BytesIO(got["body"])) as zf:
        names = zf.namelist()
        manifest = json.loads(zf.read(f"sweep-figures/{pack.MANIFEST}"))
    assert all(n.startswith("sweep-figures/") for n in names)
    assert sorted(n.removeprefix("sweep-figures/") for n in names) == sorted(
        [f["file"] for f in manifest["files"]] + [pack.MANIFEST])
    assert pack.pack_zip(ref, formats=("svg",)) is got["body"]  # built once per cache version and settings


def test_the_commit_is_read_from_git():
    try:
        short = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True,
                               check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("not a git checkout")
    assert provenance.git_commit() == short[:7]


def test_the_commit_outside_a_checkout_is_unknown(tmp_path):
    assert provenance.git_commit(tmp_path) == "unknown"
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (tmp_path / ".git" / "packed-refs").write_text("# pack-refs\n" + "ab" * 20 + " refs/heads/main\n")
    assert provenance.git_commit(tmp_path) == "abababa"


def test_latex_is_escaped_and_the_app_signs_become_macros():
    assert tex_escape("T~O 50% a_b & O→T ± 1 {x}") == (
        r"T\textasciitilde{}O 50\% a\_b \& O$\rightarrow$T $\pm$ 1 \{x\}")
    df = pd.DataFrame({"comparison": ["O→T", "I→T"], "mean": [0.8512, None], "n": [3, 4]})
    tex = latex(df, "table9", "A table", "Mean & spread, 100%", "Source: x_y.")
    assert r"Mean \& spread, 100\%" in tex and r"\begin{tabular}{lrr}" in tex
    assert r"O$\rightarrow$T & 0.851 & 3 \\" in tex and "I$\\rightarrow$T & --- & 4" in tex
    assert tex.startswith("% table9: A table\n% Source: x_y.")


def test_a_wide_table_is_drawn_transposed_and_a_narrow_one_as_is():
    wide = pd.DataFrame({"d_model": [32, 64]} | {f"column {i}": [i, i + 0.5] for i in range(12)})
    cells = typesetting._for_slide(typesetting.formatted(wide))
    assert list(cells.columns) == ["", "d_model 32", "d_model 64"] and len(cells) == 13
    narrow = pd.DataFrame({"a": [1.0, 2.0], "b": ["x", None]})
    assert typesetting._for_slide(typesetting.formatted(narrow)).to_dict("list") == {"a": ["1", "2"], "b": ["x", "—"]}


def test_the_app_offers_the_pack_in_the_sidebar(monkeypatch):
    from streamlit.testing.v1 import AppTest

    monkeypatch.setenv("TYING_CACHE_DIR", str(SHIPPED))
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.query_params["pair"] = "sweep"
    at.run()
    assert not at.exception
    buttons = [e for e in at.sidebar.get("download_button")]
    assert len(buttons) == 1 and buttons[0].proto.label == "Figure pack (zip)"


@pytest.mark.slow
@pytest.mark.parametrize("presentation", [False, True])
def test_the_demo_pack_is_complete_and_valid(tmp_path, demo_cache, presentation):
    out = tmp_path / "demo"
    argv = ["figures", str(demo_cache), "--out", str(out)] + (["--presentation"] if presentation else [])
    assert main(argv) == 0
    manifest = check_pack(out, demo_cache)
    assert manifest["presentation"] is presentation
    names = {f["figure"] for f in manifest["files"]}
    assert {"figure1-alignment", "table1", "table5", "figure3-evolution", "figure4-output-share"} <= names
    source = next(f["source"] for f in manifest["files"] if f["figure"] == "figure1-alignment")
    assert "tied cache/toylab/demo/tied-seed0" in source and "held_out=0.2" in source


def colour_pairs(spec) -> list[tuple[str, str]]:
    """Every (domain label, colour) of the spec's colour scales, and ("scheme", name) for each scheme."""
    out = []
    if isinstance(spec, dict):
        scale = spec.get("scale") if isinstance(spec.get("scale"), dict) else {}
        if isinstance(scale.get("domain"), list) and isinstance(scale.get("range"), list):
            out += [(str(d), r) for d, r in zip(scale["domain"], scale["range"]) if isinstance(r, str)]
        if isinstance(scale.get("scheme"), str):
            out.append(("scheme", scale["scheme"]))
        for v in spec.values():
            out += colour_pairs(v)
    elif isinstance(spec, list):
        for v in spec:
            out += colour_pairs(v)
    return out


NAMES = {"T": {"T", "tied"}, "I": {"I", "I→T", "I->T", "T~I", "input lookup"},
         "O": {"O", "O→T", "O->T", "T~O", "output projection"}}
"""The labels that name each matrix: itself, T's comparison with it, the tied model, a gradient's side."""


def means(label: str, m: str) -> bool:
    """Whether a series label is matrix ``m`` (T, I or O) or names it (:data:`NAMES`, a matrix's
    panel title like "T (tied)", a tied model's run)."""
    return (label in NAMES[m] or label.startswith(f"{m} ")
            or (m == "T" and (label.startswith("tied") or " tied" in label)))


@pytest.mark.slow
@pytest.mark.parametrize("name", ["demo", "paper", "sweep", "mechanism"])
def test_t_i_and_o_colours_mean_t_i_and_o_in_every_figure(name):
    """Pink, blue and vermillion colour only T, I and O (or a comparison with them, the tied model,
    the input and output sides) in every figure of the shipped caches; no colour scheme of those
    hues: the untied model, the sweep's arms, a probability are drawn in other colours."""
    from explorer.render import style

    seen = 0
    for fig, chart in shipped_charts(name):
        for label, colour in colour_pairs(chart.to_dict(validate=False)):
            if label == "scheme":
                assert colour not in ("blues", "oranges", "reds", "pinks", "purplered", "redpurple"), (fig.name, colour)
                continue
            for m, hex_ in style.PALETTE.items():
                if colour.lower() == hex_.lower():
                    seen += 1
                    assert means(label, m), (fig.name, label, m)
    assert seen > 0 or name in ("sweep", "mechanism")  # the matrices' figures use the palette at all
