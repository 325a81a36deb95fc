"""The static site's templates, style sheet and scripts (``precompute/templates/``), for :mod:`precompute.site`.

The pages are Jinja2 templates (``*.html``, escaped: every value a page shows, a token string
above all, goes in as text, never as markup); ``site.css`` is a template too, for the app's
T/I/O colours; ``site.js`` and ``tokens.js`` are copied to ``assets/`` as they are. The data a
script reads (a chart's spec, the token search's lists) is written with :func:`js_data`.

Plain CSS and classic (non-module) JavaScript: a page opened from ``file://`` may load classic
scripts from beside it, but Chromium refuses module scripts and ``fetch()`` of local files
there. Every text a script shows goes in through ``textContent``, never as markup.
"""

from __future__ import annotations

import functools
import html
import json
import math
from importlib import resources
from typing import Any

import jinja2
from markupsafe import Markup

from tying.cache.schema import MATRICES, MATRIX_NAMES
from tying.cache.verdicts import NO_CLAIM, VERDICT_STYLE

TEMPLATES = "templates"  # the folder of precompute holding the templates and the scripts
SCRIPTS = ("site.js", "tokens.js", "twins.js", "text.js")  # copied to assets/ unchanged


def js_data(value: Any) -> str:
    """A value as a JavaScript literal: JSON with '<' escaped (safe in any page), NaN as null."""
    text = json.dumps(_no_nan(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _no_nan(value: Any) -> Any:
    if isinstance(value, float):
        return None if math.isnan(value) or math.isinf(value) else value
    if isinstance(value, dict):
        return {k: _no_nan(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_nan(v) for v in value]
    return value


def sentence(text: str) -> str:
    """A phrase as a sentence: capital first letter, a full stop at the end ("" stays "")."""
    text = text.strip()
    if not text:
        return ""
    return text[0].upper() + text[1:] + ("" if text[-1] in ".!?" else ".")


def verdict_style(verdict: str) -> tuple[str, str]:
    """A verdict's colour and sign (tying.cache.verdicts.VERDICT_STYLE; an unknown one grey, unsigned)."""
    return VERDICT_STYLE.get(verdict, (VERDICT_STYLE[NO_CLAIM][0], ""))


@jinja2.pass_eval_context
def _finalize(ctx: jinja2.nodes.EvalContext, value):
    """Every ``{{ value }}`` of a page escaped with html.escape (quotes as ``&quot;`` and ``&#x27;``,
    as the site escaped them before its templates; markupsafe writes ``&#34;`` and ``&#39;``);
    markup a template made itself (a macro's output) stays as it is, and so does anything in a
    template that is not escaped (the style sheet, the Space's README)."""
    if ctx.autoescape and not hasattr(value, "__html__"):
        return Markup(html.escape(str(value), quote=True))
    return value


@functools.cache
def environment() -> jinja2.Environment:
    env = jinja2.Environment(loader=jinja2.PackageLoader("precompute", TEMPLATES),
                             autoescape=jinja2.select_autoescape(["html"], default_for_string=True, default=False),
                             finalize=_finalize, undefined=jinja2.StrictUndefined,
                             trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    env.filters["sentence"] = sentence
    env.globals.update(verdict_style=verdict_style, matrices=[(m, f"{MATRIX_NAMES[m]} matrix") for m in MATRICES])
    return env


def render(name: str, **context) -> str:
    """The template ``name`` (under precompute/templates/) filled in with ``context``."""
    return environment().get_template(name).render(**context)


def script(name: str) -> str:
    """One of SCRIPTS, as it is written to ``assets/``."""
    return resources.files("precompute").joinpath(TEMPLATES, name).read_text(encoding="utf-8")


@functools.cache
def vega_bundle() -> str:
    """Vega, Vega-Lite and vega-embed as one classic script setting window.vegaEmbed (vl-convert's
    bundle of the Vega-Lite version Altair writes), wrapped so its top-level names stay private.
    Bundled once a process (1.4 s each time: a process that writes two sites, as the tests do,
    bundled it twice)."""
    import altair as alt
    import vl_convert as vlc

    version = ".".join(alt.SCHEMA_VERSION.lstrip("v").split(".")[:2])
    known = vlc.get_vegalite_versions()
    bundle = vlc.javascript_bundle(vl_version=version if version in known else None)
    return "(function () {\n" + bundle + "\n})();\n"


NARROW = "@narrow"  # a chart's phone layout, registered under its key and this: assets/site.js draws it in a narrow column
NARROW_PX = 560  # a column narrower than this takes a chart's phone layout where it has one


def narrow_chart(key: str):
    """The phone layout of the chart registered under ``key`` (None where it has none): the set-up
    diagram's, two columns (explorer.render.setup_narrow), where one row per model needs about 570 px."""
    if key.rsplit("/", 1)[-1] not in ("setup", "figure-setup"):
        return None
    from explorer.render.setup_narrow import setup_diagram_narrow

    return setup_diagram_narrow()


# how the site names each kind of cache
KIND_LABELS = {
    "toylab": "the toy lab: tied and untied twins trained from scratch by python -m precompute demo",
    "published": "the paper's authors' published measurements of real models",
    "sweep": "the width sweep: tied and untied twins over a grid of widths and seeds",
    "mechanism": "the mechanism lab: tied twins whose output-side gradient is balanced in size or matched in reach, "
                 "beside a rerun",
    "pair": "a tied and an untied model",
}
