"""The charts' legends match their marks: built with the pages' own builders on the shipped caches.

For every legend: each entry names something drawn, runs are told apart by a channel the legend
draws (a dash pattern as a stroke, or a colour), and no label is cut (labelLimit 0, and the
whole name in the rendered SVG). Plus the one palette, legends under the plot, no black or
white on the page's background (dark theme), and the Lens page's axes.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explorer import data, export
from explorer.render import (
    alignment_charts,
    dynamics_charts,
    dynamics_tables,
    lens_charts,
    projection_charts,
    style,
    sweep_charts,
    sweep_tables,
)

CACHE = Path(__file__).resolve().parent.parent / "cache"
LEGEND_CHANNELS = ("color", "strokeDash", "shape")
BLACK_WHITE = {"black", "white", "#000", "#fff", "#000000", "#ffffff"}


def ref(name: str) -> data.CacheRef:
    path = CACHE / f"{name}.duckdb"
    if not path.exists():
        pytest.skip(f"the shipped cache {path.name} is absent")
    return data.CacheRef.of(path)


def units(spec: dict, rows=None, datasets=None):
    """Every unit view of a spec (layers and concatenations walked) with the rows it draws."""
    datasets = spec.get("datasets", datasets or {})
    if "data" in spec:
        d = spec["data"]
        rows = datasets.get(d["name"]) if "name" in d else d.get("values")
    for key in ("layer", "hconcat", "vconcat", "concat"):
        for sub in spec.get(key, []):
            yield from units(sub, rows, datasets)
    if "spec" in spec:  # a facet
        yield from units(spec["spec"], rows, datasets)
    if "mark" in spec:
        yield spec, pd.DataFrame(rows or [])


def legends(spec: dict) -> dict[tuple[str, str], dict]:
    """(channel, field) -> {"domain", "range", "legend", "drawn": values found in the rows of the
    layers that encode it} for every encoding with a legend."""
    out: dict = {}
    for view, rows in units(spec):
        for channel in LEGEND_CHANNELS:
            enc = view.get("encoding", {}).get(channel)
            if not enc or "field" not in enc or enc.get("legend", {}) is None:
                continue
            entry = out.setdefault((channel, enc["field"]), {"domain": None, "range": None, "legend": {},
                                                            "drawn": set()})
            scale = enc.get("scale") or {}
            entry["domain"] = scale.get("domain", entry["domain"])
            entry["range"] = scale.get("range", entry["range"])
            entry["legend"] = {**entry["legend"], **(enc.get("legend") or {})}
            if enc["field"] in rows:
                entry["drawn"] |= set(rows[enc["field"]].astype(str))
    return out


def assert_legends_match_marks(chart) -> dict:
    spec = chart.to_dict()
    found = legends(spec)
    assert found, "no legend at all"
    for (channel, field), e in found.items():
        assert e["domain"] is not None, f"{channel} {field}: no explicit domain"
        assert len(e["domain"]) > 1, f"{channel} {field}: a legend of one entry (a title says it better)"
        missing = [v for v in e["domain"] if str(v) not in e["drawn"]]
        assert not missing, f"{channel} {field}: legend entries with no mark: {missing}"
        assert e["legend"].get("labelLimit") == 0, f"{channel} {field}: labels may be cut"
        assert e["legend"].get("orient") == "bottom", f"{channel} {field}: legend beside the plot"
        if channel == "strokeDash" and ("shape", field) in found:  # merged with a shape legend: shapes tell apart
            assert len(set(found[("shape", field)]["range"])) == len(e["domain"])
        elif channel == "strokeDash":  # the legend draws the dashes: strokes, one pattern per entry
            assert e["legend"].get("symbolType") == "stroke"
            assert len({json.dumps(r) for r in e["range"]}) == len(e["domain"])
    return found


def svg_text(chart, presentation: bool = False) -> str:
    """The chart rendered (at the export width) and its text elements' contents, joined."""
    svg = export.to_svg(chart, presentation=presentation)
    return "\n".join(re.findall(r"<text[^>]*>([^<]*)</text>", svg))


def names_whole(chart, names, presentation: bool = False) -> None:
    text = svg_text(chart, presentation)
    assert "…" not in text
    for n in names:
        assert n.replace("&", "&amp;").replace("'", "&#39;") in text or n in text, f"{n!r} not drawn whole"


# -- Figure 3, Figure 4 and the side-by-side charts (Training dynamics) -----------------------------

def test_figure3_on_the_paper_cache_tells_the_runs_apart_by_dash():
    evo = data.table(ref("paper"), "evolution")
    chart = dynamics_charts.evolution(evo)
    found = assert_legends_match_marks(chart)
    assert found[("color", "matrix")]["domain"] == ["I", "O"]  # no T entry: the paper's runs are untied
    runs = sorted(evo["run"].unique())
    assert found[("strokeDash", "run")]["domain"] == runs
    # the points are a layer of their own (no dash channel), so the run legend draws strokes, not dots
    assert [v["mark"]["type"] for v, _ in units(chart.to_dict())] == ["line", "circle"]
    names_whole(chart, runs)
    names_whole(chart, runs, presentation=True)  # presentation mode's large labels are not cut either


def test_gradient_norms_of_two_seeds_name_each_run():
    log = data.table(ref("demo"), "train_log")
    two = log[log["run"].isin(["tied/seed0", "tied/seed1"])]
    found = assert_legends_match_marks(dynamics_charts.gradient_norms(two))
    assert found[("strokeDash", "run")]["domain"] == ["tied/seed0", "tied/seed1"]
    assert found[("color", "side")]["range"] == [style.COLOURS["I"], style.COLOURS["O"]]
    one = assert_legends_match_marks(dynamics_charts.gradient_norms(two[two["run"] == "tied/seed0"]))
    assert ("strokeDash", "run") not in one  # one run: nothing to tell apart


def test_output_share_runs_coloured_by_kind_and_dashed_in_one_legend():
    log = data.table(ref("demo"), "train_log")
    chart = dynamics_charts.output_share(log[log["run"].isin(["tied/seed0", "tied_scaled_x5/seed0", "untied/seed0"])])
    found = assert_legends_match_marks(chart)
    colour, dash = found[("color", "run")], found[("strokeDash", "run")]
    assert colour["domain"] == dash["domain"] and colour["legend"] == dash["legend"]  # merged into one legend
    assert colour["range"] == [style.COLOURS["T"], style.COLOURS["T"], style.UNTIED]


def test_side_by_side_charts_use_the_palette_and_name_every_source():
    demo, paper = ref("demo"), ref("paper")
    logs = {f"demo: {r}": g for r, g in data.per_run(demo, "train_log").items() if r == "tied/seed0"}
    logs |= {f"paper: {r}": g for r, g in data.per_run(paper, "train_log").items()}
    share = dynamics_charts.share_compared(dynamics_tables.share_by_fraction(logs))
    found = assert_legends_match_marks(share)
    assert found[("color", "source")]["range"] == [style.COLOURS["T"]] * 2  # both tied: T's colour, never blue
    names_whole(share, list(logs))
    evo = {f"demo: {r}": g for r, g in data.per_run(demo, "evolution").items() if r in ("tied/seed0", "untied/seed0")}
    evo |= {f"paper: {r}": g for r, g in data.per_run(paper, "evolution").items()}
    both = dynamics_charts.evolution_compared(dynamics_tables.evolution_by_fraction(evo))
    found = assert_legends_match_marks(both)
    assert found[("color", "matrix")]["domain"] == ["T", "I", "O"]
    assert found[("strokeDash", "source")]["domain"] == sorted(evo)
    names_whole(both, list(evo))


# -- Lens ----------------------------------------------------------------------------------------

def test_kl_legend_lists_only_the_lenses_drawn():
    paper_kl = data.table(ref("paper"), "lens_kl")  # the paper publishes the tuned lens only
    chart = lens_charts.kl_curves(paper_kl)
    assert ("shape", "series") not in assert_legends_match_marks(chart)  # one series: the axis names it
    assert "tuned lens: KL to final output" in json.dumps(chart.to_dict())
    demo_kl = data.table(ref("demo"), "lens_kl")
    found = assert_legends_match_marks(lens_charts.kl_curves(demo_kl))
    assert found[("shape", "series")]["domain"] == ["tuned lens", "logit lens"]


def test_kl_axis_spans_the_tuned_lens_and_clips_the_logit_lens_by_default():
    kl = data.table(ref("demo"), "lens_kl")
    tuned = kl[kl["lens"] == "tuned"]
    spec = lens_charts.kl_curves(kl).to_dict()
    top = spec["layer"][1]["encoding"]["y"]["scale"]["domain"][1]
    assert (tuned["kl_mean"] + tuned["kl_std"]).max() <= top < kl["kl_mean"].max()
    assert all(v["mark"].get("clip") for v in spec["layer"][:3])
    written = [v for v, rows in units(spec) if v["mark"]["type"] == "text"]
    over = kl[kl["kl_mean"] > top]
    assert len(written) == 1 and len(over)
    texts = next(rows for v, rows in units(spec) if v["mark"]["type"] == "text")["value"]
    assert sorted(texts) == sorted(f"{v:.2f} ↑" for v in over["kl_mean"])  # each clipped value written at the edge
    full = lens_charts.kl_curves(kl, y_axis="full").to_dict()
    assert "domain" not in full["layer"][1]["encoding"]["y"]["scale"] and len(full["layer"]) == 3
    symlog = lens_charts.kl_curves(kl, y_axis="symlog").to_dict()
    assert symlog["layer"][1]["encoding"]["y"]["scale"]["type"] == "symlog"
    with pytest.raises(ValueError, match="y_axis must be one of"):
        lens_charts.kl_curves(kl, y_axis="log")


def test_trajectory_columns_are_the_input_tokens_and_text_keeps_to_its_cell():
    traj = pd.DataFrame([{"position": p, "token": tok, "layer": layer, "rank": 1, "prediction": "<|endoftext|>",
                          "prob": 0.3} for p, tok in enumerate(["In", "␣a", 'say "hi"\\', "</script>"])
                         for layer in range(2)])
    spec = lens_charts.trajectory(traj).to_dict()
    axis = spec["layer"][0]["encoding"]["x"]["axis"]
    listed = json.loads(axis["labelExpr"].rsplit("[datum.value]", 1)[0])
    assert listed == ["In", "␣a", 'say "hi"\\', "</script>"]  # JSON in the expression: quotes and slashes safe
    text = spec["layer"][1]["mark"]
    assert "bandwidth('x')" in text["limit"]["expr"]  # cut to the cell's width with an ellipsis
    shown = data.trajectory(ref("demo"), "tied", "tuned", 0)
    names = shown[shown["rank"] == 1].drop_duplicates("position").sort_values("position")["token"].tolist()
    labels = json.loads(lens_charts.trajectory(shown).to_dict()["layer"][0]["encoding"]["x"]["axis"]["labelExpr"]
                        .rsplit("[datum.value]", 1)[0])
    assert labels == names and len(labels) == 20


def test_training_curve_panels_share_their_axes_at_the_containers_width():
    curve = pd.concat([pd.DataFrame({"model": m, "step": np.arange(30), "layer": layer,
                                     "kl_bits": np.linspace(5, 1, 30) + layer}) for m in ("tied", "untied")
                       for layer in (0, 1)])
    panel = lens_charts.lens_training_curve(curve, model="tied").to_dict()
    assert panel["width"] == "container" and panel["encoding"]["color"]["legend"]["orient"] == "bottom"
    assert set(pd.DataFrame(next(iter(panel["datasets"].values())))["model"]) == {"tied"}


# -- Neighbours and Alignment -----------------------------------------------------------------------

def test_the_papers_diamonds_are_named_in_the_legend():
    demo = ref("demo")
    paper = data.summary(demo).paper.table5
    assert paper
    chart = alignment_charts.overlap_curve(data.overlap_curve(demo), paper, 10)
    found = assert_legends_match_marks(chart)
    shape = found[("shape", "source")]
    assert shape["domain"] == ["this cache", alignment_charts.PAPER_OVERLAP_LABEL]
    assert shape["range"] == ["circle", "diamond"]
    names_whole(chart, [alignment_charts.PAPER_OVERLAP_LABEL])
    alone = assert_legends_match_marks(alignment_charts.overlap_curve(data.overlap_curve(demo), None, 10))
    assert ("shape", "source") not in alone  # no paper: no diamond, and no legend of one entry


def test_alignment_mean_lines_are_named_in_the_legend():
    per_token = data.alignment(ref("demo"), "linear", "held_out")
    chart = alignment_charts.cosine_histogram(per_token, title="t")
    found = assert_legends_match_marks(chart)
    assert set(found) == {("color", "comparison")}  # the dashed means are named in its title, not a key of one
    assert found[("color", "comparison")]["domain"] == ["O→T", "I→T"]
    names_whole(chart, [f"comparison (dashed: {alignment_charts.MEAN_LABEL})", "O→T", "I→T"])


def test_norm_vs_frequency_panels_fill_their_column_on_one_scale():
    norms = data.norms(ref("demo"))
    panels = [alignment_charts.norm_vs_frequency(norms, m).to_dict() for m in ("T", "I", "O")]
    assert all(p["width"] == "container" for p in panels)
    assert len({json.dumps(p["encoding"]["x"]["scale"]) for p in panels}) == 1  # the same axes in every panel
    assert [p["encoding"]["color"]["value"] for p in panels] == [style.COLOURS[m] for m in ("T", "I", "O")]
    assert len(alignment_charts.norm_vs_frequency(norms).to_dict()["hconcat"]) == 3  # the exported figure: all three


# -- every page chart ------------------------------------------------------------------------------

def page_charts():
    """One chart from each builder a page uses, on the shipped caches."""
    demo, paper, sweep = ref("demo"), ref("paper"), ref("sweep")
    log = data.table(demo, "train_log")
    s = data.summary(sweep)
    points = sweep_tables.sweep_points(s.sweep_cells)
    crossings, _ = sweep_tables.sweep_crossings(points, "d_model")
    coords = data.umap_shown(demo)
    hi = coords[coords["token"].isin(coords["token"].iloc[:3])].assign(role=["picked"] + ["neighbour"] * 8)
    sc = data.table(demo, "scaling")
    g = sc.groupby(["input_grad_scale", "target"])["mean_cosine"].agg(["mean", "std", "count"]).reset_index()
    return {
        "histogram": alignment_charts.cosine_histogram(data.alignment(demo, "linear", "held_out")),
        "norm panel": alignment_charts.norm_vs_frequency(data.norms(demo), "T"),
        "overlap histogram": alignment_charts.overlap_histogram(data.overlap_counts(demo, 10), 10),
        "overlap curve": alignment_charts.overlap_curve(data.overlap_curve(demo),
                                                        data.summary(demo).paper.table5, 10),
        "projection": projection_charts.projection(coords.iloc[:300], hi, mode="overlaid"),
        "density": projection_charts.projection_view(coords, hi, "T", density=True),
        "kl": lens_charts.kl_curves(data.table(demo, "lens_kl")),
        "kl paper": lens_charts.kl_curves(data.table(paper, "lens_kl")),
        "trajectory": lens_charts.trajectory(data.trajectory(demo, "tied", "tuned", 0)),
        "gradient norms": dynamics_charts.gradient_norms(log[log["run"].isin(["tied/seed0", "tied/seed1"])]),
        "output share": dynamics_charts.output_share(log),
        "evolution": dynamics_charts.evolution(data.table(paper, "evolution")),
        "scaling": dynamics_charts.scaling(g),
        "sweep": sweep_charts.sweep_lines(points, sweep_tables.SWEEP_SERIES["loss"], crossings=crossings),
    }


def test_every_page_chart_fills_its_container_with_its_legends_underneath():
    for name, chart in page_charts().items():
        spec = chart.to_dict()
        assert spec.get("width") == "container", name
        for (channel, _), e in legends(spec).items():
            assert e["legend"].get("orient") == "bottom" and e["legend"].get("labelLimit") == 0, (name, channel)


def test_one_palette_and_nothing_black_or_white_on_the_background():
    allowed = set(style.PALETTE.values()) | set(style.SERIES) | {style.NEUTRAL}
    for name, chart in page_charts().items():
        spec = chart.to_dict()
        assert "background" not in spec and "background" not in spec.get("config", {}), name
        views = [view for view, _ in units(spec)]
        # a text's halo: a text mark stroked in the highlight's yellow, drawn under a text at the same place
        halos = [(v["mark"].get("dx"), v["mark"].get("dy")) for v in views if v["mark"].get("type") == "text"
                 and v["mark"].get("stroke") == style.HIGHLIGHT and v["mark"].get("strokeWidth", 0) >= 3]
        for view in views:
            mark, enc = view["mark"], view.get("encoding", {})
            colour = enc.get("color", {})
            if "scale" in colour and "range" in colour["scale"]:  # categories: the palette only
                assert set(colour["scale"]["range"]) <= allowed, (name, colour["scale"]["range"])
            if "condition" in colour:  # the heat map's text: black or white on its own cell
                assert name == "trajectory" and mark["type"] == "text"
                continue
            on_halo = mark.get("type") == "text" and (mark.get("dx"), mark.get("dy")) in halos
            for value in (mark.get("color"), mark.get("stroke"), mark.get("fill"), colour.get("value")):
                if value in BLACK_WHITE:  # only on a mark of its own colour (the highlighted tokens' outline, the
                    # picked token's label on its yellow halo)
                    assert name in ("projection", "density") and (mark.get("filled") or on_halo), (name, mark)


def test_the_tied_matrix_is_drawn_last_so_it_stays_visible_over_O():
    """Figure 3 on the toy lab: T runs with O (the paper's claim); its marks are the top layers."""
    evo = data.table(ref("demo"), "evolution")
    evo = evo[evo["run"].isin(["tied/seed0", "untied/seed0"])]
    layers = dynamics_charts.evolution(evo).to_dict()["layer"]
    filters = [str(layer.get("transform", "")) for layer in layers]
    assert len(layers) == 4 and all("'T'" in f or '"T"' in f for f in filters[2:])
    assert all("!" in f for f in filters[:2])


def test_the_sweeps_series_are_in_none_of_the_matrices_colours():
    """T pink, I blue and O vermillion mean the matrices everywhere, and the verdicts have theirs: the
    Sweep's measures and arms (tied, untied, parameter-matched models) take other colours; a loss
    chart need not hold zero."""
    view = sweep_tables.sweep_view(ref("sweep"))
    points = view.points
    from tying.cache.verdicts import VERDICT_STYLE

    matrices = set(style.PALETTE.values()) | {colour for colour, _ in VERDICT_STYLE.values()}
    for chart in ("bias", "gaps", "losses"):
        spec = sweep_charts.sweep_lines(points, sweep_tables.sweep_series(points, chart)).to_dict()
        ranges = [v.get("encoding", {}).get("color", {}).get("scale", {}).get("range", []) for v, _ in units(spec)]
        used = {c for r in ranges for c in r}
        assert used and not used & matrices, (chart, used)
    losses = sweep_charts.sweep_lines(points, sweep_tables.sweep_series(points, "losses"), zero=False).to_dict()
    lo = min(v["encoding"]["y"]["scale"]["domain"][0] for v, _ in units(losses)
             if "scale" in v.get("encoding", {}).get("y", {}))
    assert lo > 0.5 * float(points["eval_loss_tied"].min())  # zoomed to the losses, not down to zero


def test_the_apps_accent_is_none_of_the_matrices_colours():
    """Buttons and toggles take Streamlit's primary colour: in either theme a grey (saturation under
    0.3), none of the hues of T's pink, I's blue and O's vermillion (saturation 0.4 and more: those
    mean the matrices only)."""
    import colorsys
    import tomllib

    config = tomllib.loads((Path(__file__).resolve().parent.parent / ".streamlit" / "config.toml").read_text())

    def saturation(h: str) -> float:
        return colorsys.rgb_to_hsv(*(int(h.lstrip("#")[i:i + 2], 16) / 255 for i in (0, 2, 4)))[1]

    assert min(saturation(c) for c in style.PALETTE.values()) >= 0.4
    from tests.test_figures_pack import contrast

    for theme, page in (("light", "#ffffff"), ("dark", "#0e1117")):  # Streamlit's own backgrounds
        accent = config["theme"][theme]["primaryColor"]
        assert saturation(accent) < 0.3, theme
        assert contrast("#ffffff", accent) >= 4.5, (theme, "a primary button's white text")
        assert contrast(accent, page) >= 3, (theme, "a toggle on the page (WCAG's 3:1 for controls)")


def test_text_on_each_matrix_colour_reads_at_4_5_to_1():
    """A chip naming T, I or O (the tour's neighbour lists, the site's keys) writes its letter in
    style.ON on the matrix's colour: WCAG AA's 4.5:1 in either theme (white on T's pink is 3.1:1)."""
    from tests.test_figures_pack import contrast

    for m, colour in style.PALETTE.items():
        assert contrast(style.ON[m], colour) >= 4.5, (m, contrast(style.ON[m], colour))
    assert contrast("#ffffff", style.PALETTE["T"]) < 4.5  # why T's chip writes in black


@pytest.mark.slow
def test_styled_dict_is_the_styled_charts_dict_for_every_figure(synthetic_caches):
    """styled_dict (one to_dict, the style's config merged in) gives what Altair's own configure calls
    with the same sections give, for every figure of the synthetic pair's cache and the mechanism lab's,
    on the screen and for a talk."""
    from explorer.render import figures, read
    from explorer.render.style import style_config, styled_dict

    def configured(chart, presentation):
        c = style_config(presentation)
        return (chart.configure_axis(**c["axis"]).configure_legend(**c["legend"]).configure_title(**c["title"])
                .configure_header(**c["header"]).configure_text(**c["text"]).configure_view(**c["view"]))

    n = 0
    for name in ("synthetic", "mechanism"):
        ref = read.CacheRef.of(synthetic_caches / f"{name}.duckdb")
        for fig in figures.available(ref):
            chart, _ = fig.build(ref)
            if chart is None:
                continue
            for presentation in (False, True):
                want = json.loads(json.dumps(configured(chart, presentation).to_dict()))
                assert json.loads(json.dumps(styled_dict(chart, presentation=presentation))) == want, fig.name
                n += 1
    assert n >= 20
