(function () {
  "use strict";
  // The cache page's map (precompute/site_map.py): colour= and select= from the address (its query or
  // its # part, the # part winning), the chosen colouring's spec put in SITE_CHARTS before assets/site.js
  // draws it, controls above the map, and every change written back to the # part (file:// allows it).
  // select= is token ids, comma-separated. Every text shown goes in through textContent.
  var maps = window.SITE_MAPS || {};
  var specs = window.SITE_CHARTS = window.SITE_CHARTS || {};
  function params() {
    var out = {};
    [window.location.search, window.location.hash].forEach(function (part) {
      part.replace(/^[?#]/, "").split("&").forEach(function (kv) {
        if (!kv) { return; }
        var i = kv.indexOf("="), k = i < 0 ? kv : kv.slice(0, i), v = i < 0 ? "" : kv.slice(i + 1);
        try { out[decodeURIComponent(k)] = decodeURIComponent(v.replace(/\+/g, " ")); } catch (e) { /* junk */ }
      });
    });
    return out;
  }
  function ids(text, max) {
    var seen = {}, out = [];
    String(text || "").split(",").forEach(function (p) {
      p = p.trim();
      if (/^[0-9]{1,9}$/.test(p) && !seen[p] && out.length < max) { seen[p] = true; out.push(Number(p)); }
    });
    return out;
  }
  function writeUrl(colour, chosen) {
    var kept = [];
    window.location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
      var k = kv.split("=")[0];
      if (kv && k !== "colour" && k !== "select") { kept.push(kv); }
    });
    if (colour !== "matrix") { kept.push("colour=" + encodeURIComponent(colour)); }
    if (chosen.length) { kept.push("select=" + chosen.join(",")); }
    var hash = kept.length ? "#" + kept.join("&") : "";
    try {
      window.history.replaceState(null, "", window.location.pathname + window.location.search + hash);
    } catch (e) {
      window.location.hash = hash;
    }
  }
  function spec(map, colour, chosen) {  // the colouring's spec over the points, the chosen ones at full strength
    var pts = map.points, n = pts.token.length, cols = {}, pick = {}, shade = new Array(n);
    chosen.forEach(function (t) { pick[t] = true; });
    for (var i = 0; i < n; i++) {
      shade[i] = chosen.length ? (pick[pts.token[i]] ? map.shade[1] : map.shade[2]) : map.shade[0];
    }
    Object.keys(pts).forEach(function (k) { if (k.indexOf("c_") !== 0) { cols[k] = pts[k]; } });
    cols.colour = colour === "matrix" ? pts.matrix : colour === "under_trained"
      ? pts.c_under_trained.map(function (f) { return map.flags[f ? 0 : 1]; })
      : colour === "log_count" ? pts.count.map(function (c) { return c > 0 ? Math.log10(c) : null; }) : pts["c_" + colour];
    cols.shade = shade;
    var s = JSON.parse(JSON.stringify(map.specs[colour]));
    s.datasets = Object.assign({}, s.datasets, {"map-points": {__columns: cols}});
    return s;
  }
  function el(tag, text, attrs) {
    var e = document.createElement(tag);
    if (text) { e.textContent = text; }
    Object.keys(attrs || {}).forEach(function (k) { e.setAttribute(k, attrs[k]); });
    return e;
  }
  Object.keys(maps).forEach(function (key) {
    var map = maps[key], box = document.querySelector("[data-chart='" + key.replace(/'/g, "\\'") + "']");
    if (!box) { return; }
    var offered = map.colours.map(function (c) { return c[0]; }), p = params();
    var state = {colour: offered.indexOf(p.colour) >= 0 ? p.colour : "matrix", chosen: ids(p.select, map.max)};
    var known = {};
    map.points.token.forEach(function (t) { known[t] = true; });
    state.chosen = state.chosen.filter(function (t) { return known[t]; });
    specs[key] = spec(map, state.colour, state.chosen);
    // the controls: colour, a search that selects its matches, the selection's size and a clear button
    var bar = el("div", "", {"class": "map-controls"});
    var label = el("label", "Colour by ");
    var pickColour = el("select", "", {"aria-label": "colour the map by"});
    map.colours.forEach(function (c) {
      var o = el("option", c[1], {value: c[0]});
      if (c[0] === state.colour) { o.selected = true; }
      pickColour.appendChild(o);
    });
    label.appendChild(pickColour);
    var find = el("input", "", {type: "search", placeholder: "select tokens with…", "aria-label": "select tokens containing"});
    var clear = el("button", "Clear selection", {type: "button"});
    var status = el("span", "", {"class": "map-status", "aria-live": "polite"});
    [label, find, clear, status].forEach(function (e) { bar.appendChild(e); });
    var note = el("p", map.about || "", {"class": "note map-note"});
    box.parentNode.insertBefore(bar, box);
    if (map.about) { box.parentNode.insertBefore(note, box); }
    function show() {
      var n = state.chosen.length;
      status.textContent = n ? n + " selected, the rest faded (select= in the address)" : "";
      clear.disabled = !n;
      pickColour.value = state.colour;
      note.hidden = !!map.about_for && state.colour !== map.about_for;  // the flag's rule beside the flag
    }
    function redraw() {
      specs[key] = spec(map, state.colour, state.chosen);
      writeUrl(state.colour, state.chosen);
      show();
      if (typeof window.SITE_REDRAW === "function") { window.SITE_REDRAW(box); }
    }
    pickColour.addEventListener("change", function () { state.colour = pickColour.value; redraw(); });
    find.addEventListener("change", function () {
      var q = find.value.replace(/␣/g, " ");
      if (!q) { return; }
      var out = [], seen = {};
      map.points.shown.forEach(function (s, i) {
        var t = map.points.token[i];
        if (String(s).replace(/␣/g, " ").indexOf(q) >= 0 && !seen[t] && out.length < map.max) { seen[t] = true; out.push(t); }
      });
      state.chosen = out;
      redraw();
    });
    clear.addEventListener("click", function () { state.chosen = []; find.value = ""; redraw(); });
    show();
  });
})();
