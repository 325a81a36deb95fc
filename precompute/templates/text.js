// The text page: a visitor's text through both twins, computed here (assets/twins.js) from the
// weights in text/*.js. The text comes from the box or the URL's #text=...; it is shown as
// text, never as HTML. The rows go into <script id="trajectory-json"> in the shape
// `python -m precompute trajectory` prints.
(function () {
  "use strict";
  var S = window.TWINS_SETUP, T = window.Twins, TOP_K = 5;
  var box = document.getElementById("text"), note = document.getElementById("note");
  var out = document.getElementById("result"), json = document.getElementById("trajectory-json");
  var lensPick = document.getElementById("lens"), models = null, timer = null, last = null;

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

  function fragmentText() {
    var m = /(?:^|&)text=([^&]*)/.exec(location.hash.replace(/^#/, ""));
    if (!m) { return null; }
    try { return decodeURIComponent(m[1]); } catch (e) { return null; }
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

  function grid(rows, role, lens, n) {  // hidden states down, positions across: the top prediction
    var wrap = el("div", null, "grid-wrap"), t = el("table", null, "grid");
    var mine = rows.filter(function (r) { return r.model === role && r.lens === lens; });
    var top = mine.filter(function (r) { return r.rank === 1; });
    function topFive(layer, p) {  // the cell's tooltip: its top-k with probabilities
      return mine.filter(function (r) { return r.layer === layer && r.position === p; })
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
          tr.appendChild(td);
        });
      t.appendChild(tr);
    });
    wrap.appendChild(t);
    return wrap;
  }

  function draw() {
    out.replaceChildren();
    if (!last) { return; }
    var lens = lensPick.value;
    Object.keys(S.roles).forEach(function (role) {
      var col = el("section", null, "twin");
      col.appendChild(el("h2", role === "tied" ? "Tied twin (T)" : "Untied twin (I and O)"));
      col.appendChild(klTable(last.kl, role));
      col.appendChild(el("p", "Top prediction of each hidden state at each position (" + lens + " lens); the "
                              + "shade is its probability; point at a cell for its top " + TOP_K + ".", "note"));
      col.appendChild(grid(last.rows, role, lens, last.n));
      out.appendChild(col);
    });
  }

  function run() {
    var text = box.value;
    history.replaceState(null, "", "#text=" + encodeURIComponent(text));
    if (!text.trim()) {
      note.textContent = "Type a text: its trajectory through both twins appears here.";
      last = null; json.textContent = "[]"; draw();
      return;
    }
    note.textContent = "Running both twins…";
    setTimeout(function () {
      try { compute(text); } catch (e) {  // never left on "Running both twins…": the reason, in one line
        note.textContent = "The twins could not read this text: " + String((e && e.message) || e).split("\n")[0];
        last = null; json.textContent = "[]"; draw();
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
    var rows = [], kl = [];
    Object.keys(m.roles).forEach(function (role) {
      var r = T.trajectory(role, m.roles[role].model, m.tokenizer, m.roles[role].lens, ids, TOP_K);
      rows = rows.concat(r.rows); kl = kl.concat(r.kl);
    });
    last = { rows: rows, kl: kl, n: ids.length };
    json.textContent = JSON.stringify(rows);
    var seconds = (performance.now() - t0) / 1000;
    note.textContent = ids.length + " tokens, computed here in " + seconds.toFixed(2) + " s." + cut;
    document.body.setAttribute("data-computed", String(seconds));
    if (!document.body.hasAttribute("data-first")) {  // since the page was asked for: loading included
      document.body.setAttribute("data-first", String(performance.now() / 1000));
    }
    draw();
  }

  box.addEventListener("input", function () { clearTimeout(timer); timer = setTimeout(run, 400); });
  lensPick.addEventListener("change", draw);
  window.addEventListener("hashchange", function () {
    var t = fragmentText();
    if (t !== null && t !== box.value) { box.value = t; run(); }
  });
  var first = fragmentText();
  if (first !== null) { box.value = first; }
  run();
})();
