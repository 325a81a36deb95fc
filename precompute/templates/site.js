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
  // the tour: the keys a clicker or a keyboard sends. Left/right arrows, PageUp/PageDown and
  // Shift+Space/Space move a step; Home and End go to the first and the last step.
  var prev = document.querySelector("link[rel=prev]");
  var next = document.querySelector("link[rel=next]");
  var tour = document.querySelector(".tour[data-steps]");
  // the presenter view (N, or ?notes=on): kept while moving on, by the address of every step it goes to
  var notesOn = /(^|[?&])notes=on(&|$)/.test(window.location.search);
  function showNotes(on) {
    notesOn = on;
    document.body.classList.toggle("show-notes", on);
    Array.prototype.forEach.call(document.querySelectorAll(".tour a[href^='step-']"), function (a) {
      a.setAttribute("href", a.getAttribute("href").split("?")[0] + (on ? "?notes=on" : ""));
    });
  }
  if (tour) { showNotes(notesOn); }
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
    else if (tour && e.key === "n") { e.preventDefault(); showNotes(!notesOn); return; }
    if (href) { e.preventDefault(); window.location.href = href.split("?")[0] + (notesOn ? "?notes=on" : ""); }
  });
})();
