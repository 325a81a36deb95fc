(function () {
  "use strict";
  var specs = window.SITE_CHARTS || {};
  var options = {renderer: "canvas", actions: {export: true, source: false, compiled: false, editor: false}};
  window.SITE_DRAWN = 0;
  // one chart after another, in page order: the first is on screen before the later ones are parsed
  var queue = Array.prototype.slice.call(document.querySelectorAll("[data-chart]"));
  var charts = queue.slice(), busy = false;
  var NARROW = 900;  // explorer/render/slide.py NARROW_PX: a window narrower than this is a phone's
  // a table wider than its column on a phone: a card per row, each value under its column's name (site.css);
  // a wider screen scrolls it in its own box
  function fitTables() {
    var phone = document.documentElement.clientWidth < NARROW;
    Array.prototype.forEach.call(document.querySelectorAll(".table-wrap > table"), function (t) {
      t.classList.remove("cards");
      if (phone && t.scrollWidth > t.parentElement.clientWidth + 1) { t.classList.add("cards"); }
    });
  }
  fitTables();
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
  // the dark preference: the chart's ground, text, axes and legends in the stylesheet's colours
  // (site.css sets --chart-ground, --chart-ink, --chart-line and --chart-grid under it only), over
  // whatever colours the spec's own config gives them; a chart is drawn again when the preference changes
  function themed(spec, theme) {
    var config = Object.assign({}, spec.config || {});
    Object.keys(theme).forEach(function (k) {
      var mine = theme[k];
      config[k] = typeof mine === "object" ? Object.assign({}, config[k] || {}, mine) : mine;
    });
    return Object.assign({}, spec, {config: config}, theme.background ? {background: theme.background} : {});
  }
  function theme() {
    var cs = getComputedStyle(document.documentElement);
    function v(name) { return cs.getPropertyValue(name).trim(); }
    var ink = v("--chart-ink"), line = v("--chart-line");
    if (!ink) { return {}; }
    return {background: v("--chart-ground"), text: {color: ink}, title: {color: ink, subtitleColor: ink},
            axis: {labelColor: ink, titleColor: ink, domainColor: line, tickColor: line, gridColor: v("--chart-grid")},
            legend: {labelColor: ink, titleColor: ink}, header: {labelColor: ink, titleColor: ink}};
  }
  // a row of panels wider than a phone's column (the map's I, T and O): one panel at a time, at the
  // column's width, under a switch of the panels' names (T, I, O); the whole row wherever it fits
  function panels(spec) {
    var row = spec.hconcat;
    if (!row || row.length < 2 || spec.params) { return null; }
    var total = 10 + 20 * (row.length - 1);  // Vega's padding, the default spacing between panels
    for (var i = 0; i < row.length; i++) {
      if (typeof row[i].width !== "number" || typeof row[i].height !== "number") { return null; }
      total += row[i].width;
    }
    return total;
  }
  function name(panel) {  // "T (tied)" -> "T"
    var t = panel.title && (panel.title.text || panel.title);
    return String(t || "").split(" ")[0];
  }
  // a chart with a phone's layout (precompute/site_assets.py: narrow_chart, registered under its key and
  // "@narrow") takes it in a column narrower than NARROW_PX (site_assets.NARROW_PX)
  var NARROW_PX = 560;
  function layout(el, spec) {  // "all", "narrow" (the chart's phone layout), or the width of one panel
    if (specs[el.getAttribute("data-chart") + "@narrow"] && el.clientWidth < NARROW_PX) { return "narrow"; }
    var total = panels(spec), width = el.clientWidth;
    if (!total || total <= width || document.documentElement.clientWidth >= NARROW) { return "all"; }
    return String(Math.max(160, Math.min(width - 12, 560)));
  }
  function pickPanel(el, names, pick) {
    var bar = el.previousElementSibling;
    if (!bar || !bar.classList.contains("panel-switch")) {
      bar = document.createElement("div");
      bar.className = "panel-switch";
      bar.setAttribute("role", "group");
      bar.setAttribute("aria-label", "the panel shown");
      names.slice().sort(function (a, b) { return "TIO".indexOf(a) - "TIO".indexOf(b); }).forEach(function (n) {
        var b = document.createElement("button");
        b.type = "button";
        b.textContent = n;
        b.setAttribute("data-panel", n);
        b.addEventListener("click", function () { el.setAttribute("data-panel", n); enqueue(el); });
        bar.appendChild(b);
      });
      el.parentNode.insertBefore(bar, el);
    }
    Array.prototype.forEach.call(bar.children, function (b) {
      b.setAttribute("aria-pressed", String(b.getAttribute("data-panel") === pick));
    });
  }
  function shown(el, spec, how) {  // the spec drawn: the whole spec, or the picked panel of its row
    var bar = el.previousElementSibling;
    if (how === "all" || how === "narrow") {
      if (bar && bar.classList.contains("panel-switch")) { bar.remove(); }
      return spec;
    }
    var names = spec.hconcat.map(name), pick = el.getAttribute("data-panel");
    if (names.indexOf(pick) < 0) { pick = names.indexOf("T") >= 0 ? "T" : names[0]; }
    el.setAttribute("data-panel", pick);
    pickPanel(el, names, pick);
    var panel = spec.hconcat[names.indexOf(pick)], width = Number(how);
    var one = Object.assign({}, spec, panel, {width: width, height: Math.round(panel.height * width / panel.width)});
    ["hconcat", "spacing", "bounds", "center", "align"].forEach(function (k) { if (!(k in panel)) { delete one[k]; } });
    return one;
  }
  function enqueue(el) {
    if (queue.indexOf(el) < 0) { queue.push(el); }
    if (!busy) { window.SITE_CHARTS_DONE = false; drawNext(); }
  }
  window.SITE_REDRAW = enqueue;  // a chart drawn anew from SITE_CHARTS (assets/map.js: the map's colouring)
  function drawNext() {
    var el = queue.shift();
    busy = !!el;
    if (!el) { window.SITE_CHARTS_DONE = true; return; }
    var spec = specs[el.getAttribute("data-chart")];
    if (!spec || typeof vegaEmbed !== "function") {
      fail(el, "This chart's data did not load.");
      drawNext();
      return;
    }
    var how = layout(el, unpacked(spec)), config = theme();
    if (how === "narrow") { spec = unpacked(specs[el.getAttribute("data-chart") + "@narrow"]); }
    var opts = Object.assign({}, options, {downloadFileName: el.getAttribute("data-file") || "chart"});
    if (el.vegaEmbedded) { el.vegaEmbedded.finalize(); }  // the last drawing's listeners
    vegaEmbed(el, themed(shown(el, spec, how), config), opts).then(function (result) {
      el.vegaEmbedded = result;
      el.vegaView = result.view;  // read by the browser tests
      // lay out once more at the drawn width: a legend whose columns follow the width may wrap
      // to a second row, which the first layout left outside the canvas
      return result.view.resize().runAsync();
    }).then(function () {
      el.setAttribute("data-drawn", "true");
      el.setAttribute("data-layout", how);
      el.setAttribute("data-theme", config.background ? "dark" : "light");
      el.setAttribute("data-shown", how === "all" || how === "narrow" ? how : el.getAttribute("data-panel"));
      window.SITE_DRAWN += 1;
      if (window.SITE_FIRST_CHART === undefined) { window.SITE_FIRST_CHART = performance.now(); }
    }).catch(function (err) {
      fail(el, "This chart could not be drawn: " + err);
    }).then(function () { window.setTimeout(drawNext, 0); });
  }
  drawNext();
  var dark = window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)");
  if (dark && dark.addEventListener) {
    dark.addEventListener("change", function () { charts.forEach(function (el) { if (el.vegaView) { enqueue(el); } }); });
  }
  var resized = null;  // a phone turned, a window resized: tables fitted, a row of panels drawn whole or one at a time anew
  window.addEventListener("resize", function () {
    window.clearTimeout(resized);
    resized = window.setTimeout(function () {
      fitTables();
      charts.forEach(function (el) {
        var spec = specs[el.getAttribute("data-chart")];
        if (el.vegaView && spec && layout(el, spec) !== el.getAttribute("data-layout")) { enqueue(el); }
      });
    }, 250);
  });
  // the tour: the keys a clicker or a keyboard sends. Left/right arrows, PageUp/PageDown and
  // Shift+Space/Space move a step; Home and End go to the first and the last step.
  var prev = document.querySelector("link[rel=prev]");
  var next = document.querySelector("link[rel=next]");
  var tour = document.querySelector(".tour[data-steps]");
  // the presenter view (?view=presenter, opened by N in a window of its own: assets/follow.js): the notes
  // beside the slide, kept while moving on by the address of every step it goes to
  var presenting = /(^|[?&])view=presenter(&|$)/.test(window.location.search);
  var keep = presenting ? "?view=presenter" : "";
  if (tour && presenting) {
    document.body.classList.add("presenter-view");
    Array.prototype.forEach.call(document.querySelectorAll(".tour a[href^='step-']"), function (a) {
      a.setAttribute("href", a.getAttribute("href").split("?")[0] + keep);
    });
  }
  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey || (e.shiftKey && e.key !== " ")) { return; }
    var t = e.target, tag = t && t.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) { return; }  // typing
    if (e.key === " " && (tag === "BUTTON" || tag === "A")) { return; }  // Space presses a focused button or link
    var href = null;
    if (e.key === "ArrowRight" || e.key === "PageDown" || (e.key === " " && !e.shiftKey)) { href = next && next.href; }
    else if (e.key === "ArrowLeft" || e.key === "PageUp" || (e.key === " " && e.shiftKey)) { href = prev && prev.href; }
    else if (tour && e.key === "Home") { href = "step-1.html"; }
    else if (tour && e.key === "End") { href = "step-" + tour.getAttribute("data-steps") + ".html"; }
    if (href) { e.preventDefault(); window.location.href = href.split("?")[0] + keep; }
  });
})();
