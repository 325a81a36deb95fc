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
    var q = box.value.toLowerCase(), alt = q.replace(/ /g, "\u2423"), found = [], exact = [];
    if (!q) { hits.textContent = ""; count.textContent = ""; return; }
    for (var t = 0; t < n; t++) {
      var s = lower[t];
      if (s.indexOf(q) >= 0 || s.indexOf(alt) >= 0) {
        (s.replace(/\u2423/g, " ").trim() === q.trim() ? exact : found).push(t);
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
      if (i) { ov.appendChild(document.createTextNode(" \u00b7 ")); }
      ov.appendChild(document.createTextNode("overlap@" + k + " " + p[0] + "~" + p[1] + " "));
      ov.appendChild(el("b", overlap(lists[p[0]], lists[p[1]]).toFixed(2)));
    });
    out.appendChild(ov);
    var cols = el("div", "", "nbcols");
    M.forEach(function (m) {
      var col = el("div", "", "nb " + m);
      col.style.setProperty("--rows", String(lists[m].length + 1));  // its heading and its list: rows shared (site.css)
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
  var m = /token=(\d+)/.exec(window.location.hash);
  var start = m ? parseInt(m[1], 10) : D.first;
  show(start >= 0 && start < n ? start : D.first);
  window.SITE_TOKENS_READY = true;
})();
