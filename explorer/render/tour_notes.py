"""Speaker notes for the tour: per step, what to say, the question a room asks (with its answer)
and the caveat to state before someone else does. The presenter view shows them, in a window of
its own (``?view=presenter`` or the N key, app and site: explorer/render/presenter.py); the
handout prints them.
"""

from __future__ import annotations

import html
from dataclasses import dataclass

from tying.cache.reference import OUTPUT_SHARE, TABLE2


@dataclass(frozen=True)
class Notes:
    say: str  # what to say while the slide is up
    ask: str  # the question a student asks here, and its short answer
    caveat: str  # what the step does not show


NOTES: dict[str, Notes] = {
    "setup": Notes(
        "Many language models read tokens through one matrix and predict them through the same matrix: weight "
        "tying. The question of the talk: what does that shared matrix T end up looking like, the untied input I "
        "or the untied output O?",
        "Why tie at all? It saves parameters (a large share of a small model's) and used to help small models; "
        "large models often untie.",
        "T, I and O come from different models: every comparison needs a map between them, never a direct "
        "subtraction."),
    "alignment": Notes(
        "Fit a linear map from one matrix to another and score each token's row: O maps onto T much better than "
        "I does. Read both against the ceiling T'->T, a second run of T itself: the most any matrix could share "
        "with T. The verdict is decided over the seeds: one run decides nothing.",
        "Why a map? Two separately trained matrices are arbitrary up to a rotation; only a fitted map makes rows "
        "comparable. The in-sample fit is the paper's protocol; the held-out one is the honest variant.",
        "A linear map with as many parameters as dimensions fits a lot: compare the two arrows with each other, "
        "not each with zero."),
    "neighbours": Notes(
        "No map at all: each token's ten nearest neighbours in T share more with its neighbours in O than in I. "
        "Read the example token's three lists out loud.",
        "Does the overlap depend on k? The curve shows every k: the order of the lines stays the same.",
        "Overlap is an average over tokens: rare tokens whose rows barely moved pull it towards chance."),
    "map": Notes(
        "The three matrices on one aligned 2-D map: the labelled token's neighbours gather in T as they do in O "
        "and scatter in I.",
        "Is the picture the evidence? No: UMAP distorts distances; the numbers on the previous two steps are the "
        "evidence, the map only shows one token.",
        "The map is fitted jointly so positions are comparable across panels; a different random seed moves "
        "the clusters but not which panels agree."),
    "gradient": Notes(
        "The cause: in a tied model the output side sends gradient to every row of T at every step, the input "
        "side only to the rows of the tokens in the batch. Early on the output side carries most of the "
        "gradient's norm.",
        "Why early? The first steps set the matrix's structure while it moves fastest; later the two sides "
        f"come closer. The paper reports {OUTPUT_SHARE['early']:.1%} over OLMo-1B's first "
        f"{OUTPUT_SHARE['early_steps']:,} steps.",
        "A share of norms says which side is larger, not which one shapes the matrix: the next step tests "
        "that."),
    "why": Notes(
        "Take the difference apart: train the tied twin again with the gradient's size balanced, or the size of "
        "AdamW's update balanced, or its reach limited to the batch's rows, or with SGD; and once more unchanged "
        "from another start, to see what a rerun alone moves. Read the verdicts on the slide, not a summary of them.",
        "The bias fell: did T turn input-like? Only if I→T rose beyond the grey band. Where only O→T fell the "
        "verdict is mixed: T left O without coming closer to I.",
        "One toy size on one corpus; an arm that changes the gradient also changes how well the model trains (the "
        "Why? page lists each arm's loss), and SGD is read only where it trained as far below the unigram as AdamW."),
    "scaling": Notes(
        "A causal test from the paper: multiply the input-side gradient and T moves towards I and away from O, "
        "the direction the explanation predicts.",
        "Then why not always scale it up? In the paper it costs output quality (perplexity 35.7 to 36.6) with "
        "no gain on downstream benchmarks.",
        f"The paper's moves are small (OLMo-1B's T to I: cosine {TABLE2[1.0]['I']:.3f} without scaling, "
        f"{TABLE2[5.0]['I']:.3f} at x5): read the direction, not the size."),
    "lens": Notes(
        "A consequence: read each layer through a tuned lens; the tied model's early layers sit further from "
        "its output (higher KL): they contribute less usefully to the residual stream.",
        "Why are the tied model's first layers hard to read? Its readout is its embedding: read through T, an "
        "early hidden state returns the token just typed, not a guess at the next (the Lens page's "
        "self-prediction figure counts how often). A tuned lens is an affine probe per layer.",
        "Undertrained translators read like the logit lens; the authors' curve is shifted by one layer against "
        "a by-the-book tuned lens."),
    "published": Notes(
        "Real models, the authors' own measurements: over released checkpoints the untied output matrix moves "
        "away from its start faster and further than the input matrix.",
        "Are these our numbers? No: they are the paper's published data, shown for reference with their source "
        "(Apache-2.0).",
        "Tied and untied real models differ in data, size and architecture: the toy twins are there to remove "
        "those confounds."),
    "sweep-bias": Notes(
        "Beyond the paper: tied and untied twins trained at several widths. Does T stay output-like as the model "
        "widens? The verdict reads the interval at each width.",
        "Does it vanish in big models? Not within this sweep; the widths here are toys, far below OLMo-1B.",
        "A few seeds per width: read the whiskers, and only name a trend the intervals support."),
    "sweep-gap": Notes(
        "Does untying pay off? The loss gap per width, untied minus tied, and against a tied model with as many "
        "parameters: below zero the untied model is ahead.",
        "Where does it start paying off? Only between widths whose intervals sit on either side of zero, beyond "
        "the rate's shading, with models past the bigram.",
        "Short training at toy widths: a threshold here is a hypothesis for larger runs, not a rule."),
}
"""Every tour step's notes, by its slug (tests check that every step has them)."""


def presenter_html(notes: Notes, number: int, n: int, next_title: str | None) -> str:
    """The app's presenter panel: the notes, the next step and a clock (filled by :data:`CLOCK_JS`)."""
    ahead = f"Next: step {number + 1}, {html.escape(next_title)}" if next_title else "Next: the end of the tour"
    rows = "".join(f"<div class='pn-row'><b>{label}</b><span>{html.escape(text)}</span></div>"
                   for label, text in (("Say", notes.say), ("They ask", notes.ask), ("Caveat", notes.caveat)))
    return (f"<section class='presenter' aria-label='speaker notes'><div class='pn-top'><span class='pn-next'>"
            f"{ahead}</span><span class='pn-clock' id='tour-clock'></span></div>{rows}</section>")


CLOCK_JS = """(function () {
  // the presenter's clock: the time of day and the time since the presenter view was first opened
  // in this tab (kept across steps in sessionStorage); one timer however often the page redraws
  var key = "tour-start", start = Number(sessionStorage.getItem(key)) || Date.now();
  sessionStorage.setItem(key, String(start));
  function pad(v) { return (v < 10 ? "0" : "") + v; }
  function tick() {
    var el = document.getElementById("tour-clock");
    if (!el) { return; }
    var now = new Date(), s = Math.floor((Date.now() - start) / 1000);
    el.textContent = pad(now.getHours()) + ":" + pad(now.getMinutes()) + " \\u00b7 " + Math.floor(s / 60) + ":"
      + pad(s % 60) + " in";
  }
  tick();
  if (!window.tourClock) { window.tourClock = window.setInterval(tick, 1000); }
})();
"""
"""The presenter view's clock (JavaScript): the app runs it in ``st.html``, the site as assets/clock.js."""
