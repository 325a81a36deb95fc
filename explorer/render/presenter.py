"""The tour's presenter view and the two windows that follow each other, in the app and the site.

A speaker runs the tour in two windows of one browser: the audience's (on the projector: the
slide, never the notes) and the presenter's (``?view=presenter``, on the laptop: the slide
small, the speaker notes, the next step and a clock). The N key in the audience's window opens
the presenter's. Moving in either window moves the other: each window says which step it shows
on a BroadcastChannel (and in localStorage, whose ``storage`` event reaches the other windows
where a channel does not: file:// pages in some browsers), and a window told of another step
goes there. No server is involved, so the static site's pages follow each other as the app's do.

A window that moves because it was told to does not announce the step it arrives at (it would
pull back a window that has since moved on): it keeps a *target* and steps toward it, and only a
move of its own (a key, a button) is announced.
"""

from __future__ import annotations

CHANNEL = "tying-tour"  # the BroadcastChannel's name and the localStorage key
PRESENTER = "presenter"  # ?view=presenter
PRESENTER_WINDOW = "tying-presenter"  # the window.open names: a second N reuses the window
AUDIENCE_WINDOW = "tying-audience"

_CORE = """%(find)s
  var N = %(n)s, STEP = %(step)s, CHANNEL = "%(channel)s";
  var f = window.tourFollow;
  if (!f) {
    f = window.tourFollow = {shown: null, target: null, id: Math.random().toString(36).slice(2), asked: 0};
    var take = function (k, from) {
      if (from === f.id || !(k >= 1 && k <= N)) { return; }
      if (k === f.shown && f.target === null) { return; }
      f.target = k;
      f.toward();
    };
    if (window.BroadcastChannel) {
      f.channel = new BroadcastChannel(CHANNEL);
      f.channel.onmessage = function (e) { if (e.data) { take(e.data.step, e.data.from); } };
    }
    window.addEventListener("storage", function (e) {
      if (e.key !== CHANNEL || !e.newValue) { return; }
      try { var d = JSON.parse(e.newValue); take(d.step, d.from); } catch (err) { /* not ours */ }
    });
    f.post = function (k) {
      if (f.channel) { f.channel.postMessage({step: k, from: f.id}); }
      try { localStorage.setItem(CHANNEL, JSON.stringify({step: k, from: f.id, t: Date.now()})); } catch (err) { /* none */ }
    };
    // a step toward the target that a click may have missed (a rerun under way): once a second
    window.setInterval(function () { if (f.target !== null) { f.toward(); } }, 1000);
  }
"""

APP_JS = "(function () {" + _CORE + """
  function click(key) {
    var b = document.querySelector(".st-key-" + key + " button");
    if (b && !b.disabled) { b.click(); }
  }
  f.toward = function () {
    if (f.target === null || f.target === f.shown) { f.target = null; return; }
    // one click per step drawn (or per 3 s, a click lost in a rerun): no overshoot
    if (f.asked === f.shown && Date.now() - f.askedAt < 3000) { return; }
    f.asked = f.shown; f.askedAt = Date.now();
    if (f.target === 1) { click("tour_home"); }
    else if (f.target === N) { click("tour_end"); }
    else { click(f.target > f.shown ? "tour_next" : "tour_prev"); }
  };
  var was = f.shown;
  f.shown = STEP;
  if (f.target !== null) {
    if (f.target === STEP) { f.target = null; } else { f.toward(); }
  } else if (was !== STEP) {
    f.post(STEP);
  }
})();
"""
"""The app's windows following each other (``%`` with find, n, step, channel: the first a line that
finds the page's step, the next two JavaScript expressions): a window told of another step clicks its
own Next / Previous / Home / End buttons until it shows it."""

SITE_JS = "(function () {" + _CORE + """
  var KEY = "tour-follow";
  f.toward = function () {
    if (f.target === null || f.target === f.shown) { f.target = null; return; }
    try { sessionStorage.setItem(KEY, String(f.target)); } catch (err) { /* none */ }
    window.location.href = "step-" + f.target + ".html" + window.location.search;
  };
  var arrived = null;
  try { arrived = sessionStorage.getItem(KEY); sessionStorage.removeItem(KEY); } catch (err) { /* none */ }
  f.shown = STEP;
  if (String(STEP) !== arrived) { f.post(STEP); }
})();
"""
"""The site's pages following each other: a page told of another step opens that step's page
(keeping ``?view=presenter``); the page it opens does not announce itself."""

OPEN_JS = """(function () {
  // N in the audience's window: the presenter view in a window of its own (the same step)
  if (window.tourOpenKey) { return; }
  window.tourOpenKey = true;
  document.addEventListener("keydown", function (e) {
    if (e.key !== "n" || e.altKey || e.ctrlKey || e.metaKey || e.shiftKey) { return; }
    var t = e.target, tag = t && t.tagName;
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || (t && t.isContentEditable)) { return; }
    if (/(^|[?&])view=%(presenter)s(&|$)/.test(window.location.search)) { return; }
    e.preventDefault();
    window.open(window.tourPresenterUrl(), "%(window)s");
  });
})();
"""


def app_js(step: int, n: int) -> str:
    """The app tour page's script: follow the other window; N opens the presenter view."""
    return (APP_JS % {"find": "", "n": n, "step": step, "channel": CHANNEL}
            + "window.tourPresenterUrl = function () { var u = new URL(window.location.href);"
              " u.searchParams.delete('presentation'); u.searchParams.delete('notes');"
              f" u.searchParams.set('view', '{PRESENTER}'); return u.toString(); }};"
            + OPEN_JS % {"presenter": PRESENTER, "window": PRESENTER_WINDOW})


def site_js() -> str:
    """The site's tour script (assets/follow.js): the step from the page's ``.tour[data-step]``."""
    find = "\n  var tour = document.querySelector('.tour[data-step]');\n  if (!tour) { return; }"
    return (SITE_JS % {"find": find, "n": "Number(tour.getAttribute('data-steps'))",
                       "step": "Number(tour.getAttribute('data-step'))", "channel": CHANNEL}
            + "window.tourPresenterUrl = function () { return window.location.href.split('?')[0] + "
              f"'?view={PRESENTER}'; }};"
            + OPEN_JS % {"presenter": PRESENTER, "window": PRESENTER_WINDOW})
