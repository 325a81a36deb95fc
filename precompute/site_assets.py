"""The static site's style sheet and scripts (written to ``assets/`` by :mod:`precompute.site`).

Plain CSS and classic (non-module) JavaScript: a page opened from ``file://`` may load classic
scripts from beside it, but Chromium refuses module scripts and ``fetch()`` of local files
there. Every text a script shows goes in through ``textContent``, never as markup.
"""

from __future__ import annotations

CSS = """
:root {
  --ink: #1b1f24; --muted: #4d5661; --line: #d5dae0; --soft: #f3f5f7; --paper: #ffffff;
  --T: #CC79A7; --I: #0072B2; --O: #D55E00; --link: #005a8e;
}
* { box-sizing: border-box; }
html { font-size: 18px; }
body { margin: 0; color: var(--ink); background: var(--paper); line-height: 1.5;
  font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; }
a { color: var(--link); }
a:focus-visible, button:focus-visible, input:focus-visible { outline: 3px solid #E69F00; outline-offset: 2px; }
header.top { background: #1b1f24; color: #fff; }
header.top nav { max-width: 1400px; margin: 0 auto; padding: 0.55rem 1.5rem; display: flex; flex-wrap: wrap;
  gap: 0.35rem 1.4rem; align-items: baseline; }
header.top a { color: #fff; text-decoration: none; font-size: 0.95rem; }
header.top a:hover { text-decoration: underline; }
header.top a.home { font-weight: 700; font-size: 1.05rem; margin-right: 0.6rem; }
header.top a[aria-current="page"] { text-decoration: underline; text-underline-offset: 0.3em; }
main { max-width: 1400px; margin: 0 auto; padding: 1.2rem 1.5rem 3rem; }
h1 { font-size: 2.1rem; line-height: 1.2; margin: 0.4rem 0 0.6rem; }
h2 { font-size: 1.5rem; margin: 2.2rem 0 0.4rem; padding-top: 0.6rem; border-top: 1px solid var(--line); }
h3 { font-size: 1.15rem; margin: 1.4rem 0 0.3rem; }
p.lead { font-size: 1.15rem; max-width: 60rem; }
p.caption, p.note { color: var(--muted); max-width: 60rem; margin: 0.2rem 0 0.6rem; }
.tio { display: inline-block; padding: 0 0.45em; border-radius: 4px; color: #fff; font-weight: 700; }
.tio.T { background: var(--T); } .tio.I { background: var(--I); } .tio.O { background: var(--O); }
.button { display: inline-block; background: #0072B2; color: #fff; text-decoration: none; font-weight: 600;
  padding: 0.55rem 1.1rem; border-radius: 8px; margin: 0.3rem 0.6rem 0.3rem 0; }
.button.secondary { background: var(--soft); color: var(--ink); border: 1px solid var(--line); }
.button:hover { filter: brightness(1.08); }
.cards { display: grid; grid-template-columns: repeat(auto-fill, minmax(22rem, 1fr)); gap: 1rem; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 0.92rem; }
th, td { border-bottom: 1px solid var(--line); padding: 0.35rem 0.7rem; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; }
table.claims { width: 100%; table-layout: fixed; }
table.claims col.c1 { width: 34%; } table.claims col.c2 { width: 32%; } table.claims col.c3 { width: 11rem; }
th.num { text-align: right; }
td.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
.table-wrap { overflow-x: auto; max-width: 100%; }
.verdict { display: inline-block; border-radius: 6px; padding: 0.1rem 0.55rem; color: #fff; font-weight: 700;
  white-space: nowrap; }
.figure { margin: 0 0 1.2rem; }
.figure .chart-box { overflow-x: auto; }
.chart { width: 100%; min-height: 120px; }
.chart.error { color: #cf222e; font-weight: 600; }
.vega-embed { width: 100%; }
.downloads { font-size: 0.9rem; color: var(--muted); margin: 0.2rem 0 0; }
.downloads a { margin-right: 0.7rem; }
.toc { columns: 2 22rem; padding-left: 1.2rem; }
footer { max-width: 1400px; margin: 0 auto; padding: 1rem 1.5rem 2rem; color: var(--muted); font-size: 0.85rem;
  border-top: 1px solid var(--line); }

/* the tour */
.step-head { display: flex; justify-content: space-between; align-items: center; gap: 1rem; }
.step-no { color: var(--muted); font-weight: 600; letter-spacing: 0.03em; margin: 0.2rem 0 0; }
.step-head .mini .button { font-size: 0.85rem; padding: 0.25rem 0.7rem; margin: 0 0 0 0.4rem; }
.tour h1 { margin-bottom: 0.2rem; }
p.claim { font-size: 1.35rem; font-weight: 600; margin: 0.2rem 0 1rem; max-width: 70rem; }
.tour-grid { display: grid; grid-template-columns: minmax(0, 3fr) minmax(18rem, 1.15fr); gap: 1.6rem;
  align-items: start; }
@media (max-width: 900px) { .tour-grid { grid-template-columns: 1fr; } }
.tour-chart { min-width: 0; overflow-x: auto; }
.tour-strip { display: grid; grid-template-columns: minmax(16rem, 1fr) minmax(0, 2fr); gap: 1.6rem;
  align-items: start; margin-bottom: 0.6rem; }
@media (max-width: 900px) { .tour-strip { grid-template-columns: 1fr; } }
.tour-strip .tour-verdict { padding: 0.5rem 1rem; margin: 0; }
.tour-strip .tour-verdict .v { font-size: 1.9rem; }
.tour-page main, .tour-page header.top nav, .tour-page footer { max-width: 1840px; }
ul.legend { list-style: none; padding: 0; margin: 0; font-size: 1.15rem; }
ul.legend li { margin: 0 0 0.5rem; }
.tour-verdict { border-radius: 10px; padding: 0.8rem 1.1rem; color: #fff; margin-bottom: 0.8rem; }
.tour-verdict .v { font-size: 2.4rem; font-weight: 800; line-height: 1.1; }
.tour-verdict .n { font-size: 1.15rem; line-height: 1.35; margin-top: 0.4rem; }
.paper { font-size: 1.05rem; line-height: 1.4; margin: 0 0 0.6rem; }
p.read { font-size: 1.05rem; max-width: 62rem; margin-top: 0.6rem; }
.pager { display: flex; align-items: center; justify-content: space-between; gap: 1rem; margin-top: 1.8rem; }
.pager .dots { font-size: 1.3rem; letter-spacing: 0.3rem; color: var(--muted); }
.pager .dots a { text-decoration: none; color: inherit; }
.pager .button.off { visibility: hidden; }
.keys { color: var(--muted); font-size: 0.85rem; text-align: center; }
.missing { background: var(--soft); border-left: 5px solid #57606a; padding: 0.8rem 1rem; max-width: 60rem; }

/* token search */
.search { display: flex; gap: 0.6rem; align-items: center; flex-wrap: wrap; margin: 0.6rem 0; }
.search input { font-size: 1.1rem; padding: 0.4rem 0.6rem; width: 22rem; max-width: 100%;
  border: 2px solid var(--line); border-radius: 6px; }
.hits { display: flex; flex-wrap: wrap; gap: 0.35rem; margin: 0.4rem 0 1rem; max-height: 9.5rem; overflow-y: auto; }
.hits button, .nb button { font: inherit; font-family: ui-monospace, "DejaVu Sans Mono", Menlo, monospace;
  font-size: 0.95rem; border: 1px solid var(--line); background: var(--soft); border-radius: 5px;
  padding: 0.1rem 0.45rem; cursor: pointer; color: var(--ink); }
.hits button[aria-pressed="true"] { background: #1b1f24; color: #fff; }
.picked { font-size: 1.6rem; margin: 0.4rem 0; }
.picked code { font-size: 1.6rem; background: var(--soft); padding: 0 0.3rem; border-radius: 4px; }
.overlaps { font-size: 1.1rem; margin: 0 0 0.8rem; }
.overlaps b { font-variant-numeric: tabular-nums; }
.nbcols { display: grid; grid-template-columns: repeat(3, minmax(0, 1fr)); gap: 1.2rem; }
@media (max-width: 800px) { .nbcols { grid-template-columns: 1fr; } }
.nb h3 { margin: 0 0 0.4rem; padding: 0.2rem 0.6rem; color: #fff; border-radius: 6px; font-size: 1.05rem; }
.nb.T h3 { background: var(--T); } .nb.I h3 { background: var(--I); } .nb.O h3 { background: var(--O); }
.nb ol { margin: 0; padding-left: 2rem; }
.nb li { margin: 0.15rem 0; }
.nb .also { color: var(--muted); font-size: 0.8rem; margin-left: 0.4rem; }
"""

SITE_JS = """
(function () {
  "use strict";
  var specs = window.SITE_CHARTS || {};
  var options = {renderer: "canvas", actions: {export: true, source: false, compiled: false, editor: false}};
  window.SITE_DRAWN = 0;
  // one chart after another, in page order: the first is on screen before the later ones are parsed
  var queue = Array.prototype.slice.call(document.querySelectorAll("[data-chart]"));
  function fail(el, text) {
    el.textContent = text;
    el.classList.add("error");
  }
  function unpacked(spec) {  // datasets written as columns (precompute/site.py: _packed) back into rows
    var sets = spec.datasets || {};
    Object.keys(sets).forEach(function (name) {
      var cols = sets[name] && sets[name].__columns;
      if (!cols) { return; }
      var keys = Object.keys(cols), n = keys.length ? cols[keys[0]].length : 0, rows = new Array(n);
      for (var i = 0; i < n; i++) {
        var r = {};
        for (var j = 0; j < keys.length; j++) { r[keys[j]] = cols[keys[j]][i]; }
        rows[i] = r;
      }
      sets[name] = rows;
    });
    return spec;
  }
  function drawNext() {
    var el = queue.shift();
    if (!el) { window.SITE_CHARTS_DONE = true; return; }
    var spec = specs[el.getAttribute("data-chart")];
    if (!spec || typeof vegaEmbed !== "function") {
      fail(el, "This chart's data did not load.");
      drawNext();
      return;
    }
    var opts = Object.assign({}, options, {downloadFileName: el.getAttribute("data-file") || "chart"});
    vegaEmbed(el, unpacked(spec), opts).then(function (result) {
      // lay out once more at the drawn width: a legend whose columns follow the width may wrap
      // to a second row, which the first layout left outside the canvas
      return result.view.resize().runAsync();
    }).then(function () {
      el.setAttribute("data-drawn", "true");
      window.SITE_DRAWN += 1;
      if (window.SITE_FIRST_CHART === undefined) { window.SITE_FIRST_CHART = performance.now(); }
    }).catch(function (err) {
      fail(el, "This chart could not be drawn: " + err);
    }).then(function () { window.setTimeout(drawNext, 0); });
  }
  drawNext();
  // the tour: left/right arrows and PageUp/PageDown (a presentation clicker) move between steps
  var prev = document.querySelector("link[rel=prev]");
  var next = document.querySelector("link[rel=next]");
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) { return; }
    var t = e.target;
    if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.isContentEditable)) { return; }
    var go = (e.key === "ArrowRight" || e.key === "PageDown") ? next :
             (e.key === "ArrowLeft" || e.key === "PageUp") ? prev : null;
    if (go) { e.preventDefault(); window.location.href = go.href; }
  });
})();
"""

TOKENS_JS = """
(function () {
  "use strict";
  var D = window.SITE_TOKENS;
  var n = D.shown.length, k = D.k, M = ["T", "I", "O"];
  var box = document.getElementById("q"), hits = document.getElementById("hits");
  var count = document.getElementById("count"), out = document.getElementById("picked");
  var lower = D.shown.map(function (s) { return s.toLowerCase(); });
  var LIMIT = 120;

  function row(m, t) { return D[m].slice(t * k, (t + 1) * k); }
  function overlap(a, b) {
    var s = new Set(a), c = 0;
    b.forEach(function (x) { if (s.has(x)) { c += 1; } });
    return c / k;
  }
  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }
  function tokenButton(t, pressed) {
    var b = el("button", D.shown[t]);
    b.type = "button";
    b.setAttribute("data-token", String(t));
    b.title = "token " + t + (D.freq ? ", seen " + D.freq[t] + " times" : "");
    b.setAttribute("aria-pressed", pressed ? "true" : "false");
    b.addEventListener("click", function () { show(t); });
    return b;
  }
  function search() {
    var q = box.value.toLowerCase(), alt = q.replace(/ /g, "\\u2423"), found = [], exact = [];
    if (!q) { hits.textContent = ""; count.textContent = ""; return; }
    for (var t = 0; t < n; t++) {
      var s = lower[t];
      if (s.indexOf(q) >= 0 || s.indexOf(alt) >= 0) {
        (s.replace(/\\u2423/g, " ").trim() === q.trim() ? exact : found).push(t);
      }
    }
    var byFreq = function (a, b) { return D.freq ? D.freq[b] - D.freq[a] : a - b; };
    var all = exact.sort(byFreq).concat(found.sort(byFreq));
    count.textContent = all.length + " token" + (all.length === 1 ? "" : "s") +
      (all.length > LIMIT ? ", the " + LIMIT + " most frequent shown" : "");
    hits.textContent = "";
    all.slice(0, LIMIT).forEach(function (t) { hits.appendChild(tokenButton(t, t === current)); });
  }
  var current = null;
  function show(t) {
    current = t;
    out.textContent = "";
    var head = el("p", "", "picked");
    head.appendChild(document.createTextNode("Token "));
    head.appendChild(el("code", D.shown[t]));
    head.appendChild(el("span", " (id " + t + (D.freq ? ", seen " + D.freq[t].toLocaleString() + " times" : "") +
      ")", "note"));
    out.appendChild(head);
    var lists = {};
    M.forEach(function (m) { lists[m] = row(m, t); });
    var ov = el("p", "", "overlaps");
    [["T", "I"], ["T", "O"], ["I", "O"]].forEach(function (p, i) {
      if (i) { ov.appendChild(document.createTextNode(" \\u00b7 ")); }
      ov.appendChild(document.createTextNode("overlap@" + k + " " + p[0] + "~" + p[1] + " "));
      ov.appendChild(el("b", overlap(lists[p[0]], lists[p[1]]).toFixed(2)));
    });
    out.appendChild(ov);
    var cols = el("div", "", "nbcols");
    M.forEach(function (m) {
      var col = el("div", "", "nb " + m);
      col.appendChild(el("h3", D.names[m]));
      var ol = el("ol");
      lists[m].forEach(function (nb) {
        var li = el("li");
        li.appendChild(tokenButton(nb, false));
        var also = M.filter(function (o) { return o !== m && lists[o].indexOf(nb) >= 0; });
        if (also.length) { li.appendChild(el("span", "also in " + also.join(", "), "also")); }
        ol.appendChild(li);
      });
      col.appendChild(ol);
      cols.appendChild(col);
    });
    out.appendChild(cols);
    if (window.history && window.history.replaceState) { window.history.replaceState(null, "", "#token=" + t); }
    Array.prototype.forEach.call(hits.querySelectorAll("button"), function (b) {
      b.setAttribute("aria-pressed", b.getAttribute("data-token") === String(t) ? "true" : "false");
    });
  }
  box.addEventListener("input", search);
  box.addEventListener("keydown", function (e) {
    var first = hits.querySelector("button");
    if (e.key === "Enter" && first) { first.click(); }
  });
  var m = /token=(\\d+)/.exec(window.location.hash);
  var start = m ? parseInt(m[1], 10) : D.first;
  show(start >= 0 && start < n ? start : D.first);
  window.SITE_TOKENS_READY = true;
})();
"""
