// The text page: a visitor's text through both twins, computed here (assets/twins.js) from the
// weights in text/*.js. The text comes from the box or the URL's #text=...; it is shown as
// text, never as HTML. The rows go into <script id="trajectory-json"> in the shape
// `python -m precompute trajectory` prints; the pinned tokens' (#...&pin=a,b) probabilities, from
// the whole softmax, into <script id="pinned-json">. A click on a cell follows it: its top 10, and
// the pinned tokens' curves at its position.
(function () {
  "use strict";
  var S = window.TWINS_SETUP, T = window.Twins, TOP_K = 10;
  var box = document.getElementById("text"), note = document.getElementById("note");
  var out = document.getElementById("result"), json = document.getElementById("trajectory-json");
  var pinBox = document.getElementById("pins"), pinJson = document.getElementById("pinned-json");
  var lensPick = document.getElementById("lens"), models = null, timer = null, last = null, cell = null;
  var PIN_COLOURS = ["#7A5195", "#00838F", "#888888", "#444444"];  // none of T's, I's or O's colours
  var SVG = "http://www.w3.org/2000/svg";

  function el(tag, text, cls) {
    var e = document.createElement(tag);
    if (text !== undefined && text !== null) { e.textContent = text; }
    if (cls) { e.className = cls; }
    return e;
  }
  function shown(s) { return s.replace(/^ /, "␣").replace(/ $/, "␣").replace(/\n/g, "↵"); }

  function load() {  // decode the weights once, when the first text runs
    if (models) { return models; }
    var parts = {};
    window.TWINS_DATA.forEach(function (d) {
      var key = d[0] + "/" + d[1];
      (parts[key] = parts[key] || []).push(d[2]);
    });
    models = { tokenizer: new T.Tokenizer(S.tokenizer), roles: {} };
    Object.keys(S.roles).forEach(function (role) {
      var cfg = S.roles[role].config;
      var m = T.readSafetensors(T.fromBase64(parts[role + "/model"]));
      var l = T.readSafetensors(T.fromBase64(parts[role + "/lens"]));
      models.roles[role] = { model: new T.Model(cfg, m.tensors), lens: new T.TunedLens(l.tensors, cfg.hidden_size) };
    });
    return models;
  }

  function fragment(name) {  // #text=...&pin=... (the query string's pin= too)
    var m = new RegExp("(?:^|&)" + name + "=([^&]*)").exec(location.hash.replace(/^#/, ""))
      || (name === "pin" ? /(?:^|&)pin=([^&]*)/.exec(location.search.replace(/^\?/, "")) : null);
    if (!m) { return null; }
    try { return decodeURIComponent(m[1]); } catch (e) { return null; }
  }
  function fragmentText() { return fragment("text"); }
  function raw(pin) { return pin.replace(/␣/g, " ").replace(/↵/g, "\n"); }  // a pin as shown -> as decoded
  function pins() {
    var seen = {};
    return pinBox.value.split(",").map(raw).filter(function (p) {
      if (!p || seen[p]) { return false; }
      seen[p] = true; return true;
    }).slice(0, 8);
  }
  function writeHash() {
    var h = "#text=" + encodeURIComponent(box.value);
    if (pinBox.value) { h += "&pin=" + encodeURIComponent(pinBox.value); }
    history.replaceState(null, "", h);
  }

  function klTable(kl, role) {
    var t = el("table", null, "kl"), head = el("tr");
    ["hidden state", "tuned lens KL (bits)", "logit lens KL (bits)"].forEach(function (h) { head.appendChild(el("th", h)); });
    t.appendChild(head);
    var layers = {};
    kl.filter(function (r) { return r.model === role; }).forEach(function (r) {
      (layers[r.layer] = layers[r.layer] || {})[r.lens] = r.kl_bits;
    });
    Object.keys(layers).forEach(function (layer) {
      var tr = el("tr");
      tr.appendChild(el("td", layer === "0" ? "0 (input)" : layer));
      ["tuned", "logit"].forEach(function (lens) {
        var v = layers[layer][lens];
        tr.appendChild(el("td", v === undefined ? "—" : v.toFixed(3), "num"));
      });
      t.appendChild(tr);
    });
    return t;
  }

  function cellTop(mine, layer, p) {  // a cell's top-k with probabilities, best first
    return mine.filter(function (r) { return r.layer === layer && r.position === p; })
      .sort(function (a, b) { return a.rank - b.rank; });
  }

  function commitments(top, n) {  // per position: the first hidden state from which the final top-1 stays top-1
    var last = Math.max.apply(null, top.map(function (r) { return r.layer; })), out = [];
    for (var p = 0; p < n; p++) {
      var col = top.filter(function (r) { return r.position === p; }).sort(function (a, b) { return a.layer - b.layer; });
      var s = last;
      while (s > 0 && col[s - 1].prediction === col[last].prediction) { s--; }
      out.push(s);
    }
    return { at: out, last: last };
  }

  function strip(top, n, tokens) {  // the commitment strip: a cell per position
    var c = commitments(top, n), wrap = el("div", null, "grid-wrap"), t = el("table", null, "grid strip");
    var head = el("tr"), row = el("tr");
    head.appendChild(el("th", "input →"));
    row.appendChild(el("th", "commits at"));
    for (var p = 0; p < n; p++) {
      head.appendChild(el("th", shown(tokens[p])));
      var td = el("td", String(c.at[p]), "num");
      td.style.setProperty("--p", String(c.last ? c.at[p] / c.last : 0));
      row.appendChild(td);
    }
    t.appendChild(head); t.appendChild(row); wrap.appendChild(t);
    return wrap;
  }

  function grid(rows, role, lens, n) {  // hidden states down, positions across: the top prediction
    var wrap = el("div", null, "grid-wrap"), t = el("table", null, "grid");
    var mine = rows.filter(function (r) { return r.model === role && r.lens === lens; });
    var top = mine.filter(function (r) { return r.rank === 1; });
    function topFive(layer, p) {  // the cell's tooltip: its top-k with probabilities
      return cellTop(mine, layer, p)
        .map(function (r) { return r.rank + ". " + shown(r.prediction) + "  " + r.prob.toFixed(3); }).join("\n");
    }
    var head = el("tr");
    head.appendChild(el("th", "input →"));
    for (var p = 0; p < n; p++) { head.appendChild(el("th", shown(top.find(function (r) { return r.position === p; }).token))); }
    t.appendChild(head);
    var layers = Array.from(new Set(top.map(function (r) { return r.layer; }))).sort(function (a, b) { return b - a; });
    layers.forEach(function (layer) {
      var tr = el("tr");
      tr.appendChild(el("th", layer === 0 ? "0 (input)" : String(layer)));
      top.filter(function (r) { return r.layer === layer; }).sort(function (a, b) { return a.position - b.position; })
        .forEach(function (r) {
          var td = el("td", shown(r.prediction));
          td.title = topFive(r.layer, r.position);
          td.style.setProperty("--p", String(Math.min(1, r.prob)));
          td.tabIndex = 0;
          td.setAttribute("data-position", String(r.position));
          td.setAttribute("data-layer", String(r.layer));
          if (cell && cell.position === r.position && cell.layer === r.layer) { td.className = "picked"; }
          td.addEventListener("click", function () { cell = { position: r.position, layer: r.layer }; draw(); });
          td.addEventListener("keydown", function (e) {
            if (e.key === "Enter" || e.key === " ") { e.preventDefault(); cell = { position: r.position, layer: r.layer }; draw(); }
          });
          tr.appendChild(td);
        });
      t.appendChild(tr);
    });
    wrap.appendChild(t);
    return wrap;
  }

  function svg(tag, attrs, text) {
    var e = document.createElementNS(SVG, tag);
    Object.keys(attrs).forEach(function (k) { e.setAttribute(k, String(attrs[k])); });
    if (text !== undefined) { e.textContent = text; }
    return e;
  }

  function pinChart(role, position) {  // each pin's probability at every hidden state: tuned solid, logit dashed
    var mine = last.pinned.filter(function (r) { return r.model === role && r.position === position; });
    var layers = Math.max.apply(null, mine.map(function (r) { return r.layer; })) + 1;
    var W = 340, H = 170, L = 34, B = 26, R = 8, Tp = 8, g = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "pins",
      role: "img", "aria-label": "pinned tokens' probability at every hidden state" });
    // from 0 to the largest probability drawn, rounded up (a toy's are small: 0 to 1 would flatten them)
    var most = Math.max(1e-3, Math.max.apply(null, mine.map(function (r) { return r.prob; })));
    var step = Math.pow(10, Math.floor(Math.log10(most))), top = Math.min(1, Math.ceil(most / step) * step);
    function x(l) { return L + (W - L - R) * (layers > 1 ? l / (layers - 1) : 0.5); }
    function y(v) { return Tp + (H - Tp - B) * (1 - v / top); }
    [0, top / 2, top].forEach(function (v) {
      g.appendChild(svg("line", { x1: L, x2: W - R, y1: y(v), y2: y(v), class: "rule" }));
      g.appendChild(svg("text", { x: L - 4, y: y(v) + 4, "text-anchor": "end" }, String(+v.toPrecision(2))));
    });
    for (var l = 0; l < layers; l++) { g.appendChild(svg("text", { x: x(l), y: H - 8, "text-anchor": "middle" }, String(l))); }
    last.pins.forEach(function (pin, i) {
      ["tuned", "logit"].forEach(function (lens) {
        var pts = mine.filter(function (r) { return r.pin === pin && r.lens === lens; })
          .sort(function (a, b) { return a.layer - b.layer; });
        if (!pts.length) { return; }
        var line = svg("polyline", { points: pts.map(function (r) { return x(r.layer) + "," + y(r.prob); }).join(" "),
          fill: "none", stroke: PIN_COLOURS[i % PIN_COLOURS.length], "stroke-width": 2,
          "stroke-dasharray": lens === "logit" ? "6 4" : "none" });
        line.appendChild(svg("title", {}, shown(pin) + ", " + lens + " lens"));
        g.appendChild(line);
      });
    });
    var wrap = el("figure", null, "pin-chart");
    wrap.appendChild(g);
    var cap = el("figcaption", null, "note");
    last.pins.forEach(function (pin, i) {
      var key = el("span", shown(pin), "pin-key");
      key.style.borderColor = PIN_COLOURS[i % PIN_COLOURS.length];
      cap.appendChild(key);
    });
    cap.appendChild(document.createTextNode(" probability at every hidden state (x) after position " + position
                                             + "; tuned lens solid, logit lens dashed; from the whole softmax."));
    wrap.appendChild(cap);
    return wrap;
  }

  function cellList(role, lens) {  // the followed cell's top 10
    var mine = last.rows.filter(function (r) { return r.model === role && r.lens === lens; });
    var t = el("table", null, "kl cell-top"), head = el("tr");
    ["rank", "prediction", "probability"].forEach(function (h) { head.appendChild(el("th", h)); });
    t.appendChild(head);
    cellTop(mine, cell.layer, cell.position).forEach(function (r) {
      var tr = el("tr");
      tr.appendChild(el("td", String(r.rank), "num"));
      tr.appendChild(el("td", shown(r.prediction), "tok"));
      tr.appendChild(el("td", r.prob.toFixed(4), "num"));
      t.appendChild(tr);
    });
    return t;
  }

  function draw() {
    out.replaceChildren();
    if (!last) { return; }
    var lens = lensPick.value;
    if (!cell || cell.position >= last.n) { cell = { position: last.n - 1, layer: last.layers - 1 }; }
    Object.keys(S.roles).forEach(function (role) {
      var col = el("section", null, "twin");
      col.appendChild(el("h2", role === "tied" ? "Tied twin (T)" : "Untied twin (I and O)"));
      col.appendChild(klTable(last.kl, role));
      col.appendChild(el("p", "Top prediction of each hidden state at each position (" + lens + " lens); the "
                              + "shade is its probability; click a cell for its top " + TOP_K + ".", "note"));
      col.appendChild(grid(last.rows, role, lens, last.n));
      col.appendChild(el("p", "Commitment: the first hidden state from which the final top-1 stays top-1 ("
                              + lens + " lens).", "note"));
      var top = last.rows.filter(function (r) { return r.model === role && r.lens === lens && r.rank === 1; });
      col.appendChild(strip(top, last.n, last.tokens));
      col.appendChild(el("h3", "Top " + TOP_K + " at hidden state " + cell.layer + ", after “"
                               + shown(last.tokens[cell.position]) + "” (position " + cell.position + ")"));
      col.appendChild(cellList(role, lens));
      if (last.pins.length) { col.appendChild(pinChart(role, cell.position)); }
      if (last.unknown.length) {
        col.appendChild(el("p", "Not a single token of the twins' vocabulary, so not drawn: "
                                + last.unknown.map(function (p) { return JSON.stringify(shown(p)); }).join(", ") + ".", "note"));
      }
      out.appendChild(col);
    });
  }

  function run() {
    var text = box.value;
    writeHash();
    if (!text.trim()) {
      note.textContent = "Type a text: its trajectory through both twins appears here.";
      last = null; json.textContent = "[]"; pinJson.textContent = "[]"; draw();
      return;
    }
    note.textContent = "Running both twins…";
    setTimeout(function () {
      try { compute(text); } catch (e) {  // never left on "Running both twins…": the reason, in one line
        note.textContent = "The twins could not read this text: " + String((e && e.message) || e).split("\n")[0];
        last = null; json.textContent = "[]"; pinJson.textContent = "[]"; draw();
      }
    }, 0);
  }

  var PREFIX = 4 * 2048;  // characters read: a bounded prefix, far more than the twins' context needs

  function compute(text) {
    var t0 = performance.now(), m = load(), limit = (S.context || 64) + 1, cut = "";
    var ids = m.tokenizer.encode(text.slice(0, PREFIX), limit);
    if (ids.length > limit - 1) {
      cut = " The twins read at most " + (limit - 1) + " tokens: the first " + (limit - 1) + " are shown.";
      ids = ids.slice(0, limit - 1);
    }
    var rows = [], kl = [], pinned = [], known = {}, unknown = [];
    pins().forEach(function (p) {
      var id = m.tokenizer.idOf(p);
      if (id < 0) { unknown.push(p); } else { known[p] = id; }
    });
    Object.keys(m.roles).forEach(function (role) {
      var r = T.trajectory(role, m.roles[role].model, m.tokenizer, m.roles[role].lens, ids, TOP_K, known);
      rows = rows.concat(r.rows); kl = kl.concat(r.kl); pinned = pinned.concat(r.pinned);
    });
    var layers = 1 + Math.max.apply(null, rows.map(function (r) { return r.layer; }));
    last = { rows: rows, kl: kl, n: ids.length, layers: layers, pinned: pinned, pins: Object.keys(known),
             unknown: unknown, tokens: ids.map(function (i) { return m.tokenizer.decode(i); }) };
    json.textContent = JSON.stringify(rows);
    pinJson.textContent = JSON.stringify(pinned);
    var seconds = (performance.now() - t0) / 1000;
    note.textContent = ids.length + " tokens, computed here in " + seconds.toFixed(2) + " s." + cut;
    document.body.setAttribute("data-computed", String(seconds));
    if (!document.body.hasAttribute("data-first")) {  // since the page was asked for: loading included
      document.body.setAttribute("data-first", String(performance.now() / 1000));
    }
    draw();
  }

  box.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(run, 400); });
  pinBox.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(run, 400); });
  lensPick.addEventListener("change", draw);
  window.addEventListener("hashchange", function () {
    var t = fragmentText(), p = fragment("pin");
    var changed = (t !== null && t !== box.value) || (p !== null && p !== pinBox.value);
    if (t !== null) { box.value = t; }
    if (p !== null) { pinBox.value = p; }
    if (changed) { run(); }
  });
  var first = fragmentText(), firstPins = fragment("pin");
  if (first !== null) { box.value = first; }
  if (firstPins !== null) { pinBox.value = firstPins; }
  run();
})();
