"""What a site's charts draw, read from each chart's Vega scenegraph (assets/site.js keeps the view of
every chart it drew as the element's ``vegaView``), for the dark-preference test of
tests/test_site_chromium.py: each chart's background (the view's and a pixel of its canvas) and
each text it draws (axis labels and titles, legends, titles, text marks) with its colour and the
colour under it (the last opaque rect, filled symbol, group or halo drawn before it that holds its
centre, else the background), blended by their opacities.
"""

from __future__ import annotations

from tests.test_figures_pack import contrast

CHART_INK_JS = """
const ctx = document.createElement('canvas').getContext('2d');
const rgb = c => { ctx.fillStyle = '#000000'; ctx.fillStyle = c; const s = ctx.fillStyle;
  if (s[0] === '#') return [1, 3, 5].map(i => parseInt(s.slice(i, i + 2), 16));
  return (s.match(/[\\d.]+/g) || []).slice(0, 3).map(Number); };
const over = (c, a, bg) => c.map((v, i) => a * v + (1 - a) * bg[i]);
const out = [];
for (const el of document.querySelectorAll('[data-chart]')) {
  const view = el.vegaView;
  if (!view) { out.push({chart: el.getAttribute('data-chart'), missing: true}); continue; }
  const bg = rgb(view.background() || '#ffffff');
  const canvas = el.querySelector('canvas');
  const px = canvas ? Array.from(canvas.getContext('2d').getImageData(2, 2, 1, 1).data).slice(0, 3) : null;
  const grounds = [], texts = [];
  (function walk(mark, ox, oy) {
    for (const item of mark.items || []) {
      const op = item.opacity ?? 1;
      if (mark.marktype === 'group') {
        const gx = ox + (item.x || 0), gy = oy + (item.y || 0);
        if (item.fill && item.fill !== 'transparent' && item.bounds && op * (item.fillOpacity ?? 1) >= 0.9)
          grounds.push({b: [ox + item.bounds.x1, oy + item.bounds.y1, ox + item.bounds.x2, oy + item.bounds.y2], c: rgb(item.fill)});
        for (const child of item.items || []) walk(child, gx, gy);
        continue;
      }
      if (!item.bounds || item.bounds.x2 < item.bounds.x1) continue;
      const b = [ox + item.bounds.x1, oy + item.bounds.y1, ox + item.bounds.x2, oy + item.bounds.y2];
      const fo = op * (item.fillOpacity ?? 1);
      if (mark.marktype === 'text') {
        const text = Array.isArray(item.text) ? item.text.join(' ') : String(item.text ?? '');
        if (!text.trim() || !item.fill || fo === 0) continue;
        if (item.stroke && item.strokeWidth > 0) { grounds.push({b: b, c: rgb(item.stroke), halo: true}); continue; }
        texts.push({text: text.slice(0, 40), role: mark.role, fill: rgb(item.fill), alpha: fo, b: b, at: grounds.length});
      } else if (['rect', 'symbol', 'arc', 'area'].includes(mark.marktype) && item.fill && fo >= 0.9) {
        grounds.push({b: b, c: rgb(item.fill)});
      }
    }
  })(view.scenegraph().root, 0, 0);
  const rows = texts.map(t => {
    const cx = (t.b[0] + t.b[2]) / 2, cy = (t.b[1] + t.b[3]) / 2;
    let under = bg;
    for (let i = t.at - 1; i >= 0; i--) {
      const g = grounds[i].b;
      if (g[0] <= cx && cx <= g[2] && g[1] <= cy && cy <= g[3]) { under = grounds[i].c; break; }
    }
    return {text: t.text, role: t.role, fg: over(t.fill, t.alpha, under), bg: under};
  });
  out.push({chart: el.getAttribute('data-chart'), theme: el.getAttribute('data-theme'), background: bg, pixel: px, texts: rows});
}
return out;
"""


def hexed(c) -> str:
    return "#" + "".join(f"{max(0, min(255, round(v))):02x}" for v in c)


def is_dark(c) -> bool:
    """Whether the colour ``c`` ([r, g, b]) is a dark ground: white on it at 12:1 or more."""
    return contrast("#ffffff", hexed(c)) >= 12


def charts(driver) -> list[dict]:
    """Each chart of the page: ``chart`` (its key), ``theme`` (as site.js drew it), ``background``
    and ``pixel`` ([r, g, b]), and ``texts``: ``(text, role, contrast, colour, ground)``."""
    out = []
    for c in driver.execute_script(CHART_INK_JS):
        if c.get("missing"):
            out.append(c)
            continue
        c["texts"] = [(t["text"], t["role"], round(contrast(hexed(t["fg"]), hexed(t["bg"])), 2), hexed(t["fg"]),
                       hexed(t["bg"])) for t in c["texts"]]
        out.append(c)
    return out
