"""Tokens and text as a person reads them on a page: plain text, never markup (the readers of
:mod:`explorer.render.read` and the pages show tokens through here)."""

from __future__ import annotations

import html

_CONTROL = {"\n": "↵", "\t": "⇥", "\r": "␍"}
_TYPED = {shown: c for c, shown in _CONTROL.items()} | {"␣": " "}


def visible_token(text: str | None, raw: str | None = None) -> str:
    """A token as a person can read it: leading/trailing spaces as '␣', controls as symbols,
    undecodable bytes as their raw token (e.g. 'Ã¢' or '<0xE2>'). Plain text, not markup."""
    if text is None:
        text = raw or ""
    if "\ufffd" in text and raw:
        return f"⟨{raw}⟩"
    out = "".join(_CONTROL.get(c, c if c.isprintable() or c == " " else f"\\x{ord(c):02x}") for c in text)
    stripped = out.strip(" ")
    lead = len(out) - len(out.lstrip(" "))
    trail = len(out) - len(out.rstrip(" "))
    if not stripped:
        return "␣" * len(out) if out else "∅"
    return "␣" * lead + stripped + "␣" * trail


def typed_text(shown: str) -> str:
    """The text a token shown by :func:`visible_token` stands for: its '␣' and control symbols back to
    the characters ('␣Paris' -> ' Paris', 'a↵' -> 'a\\n'), as a visitor types a token to pin it."""
    return "".join(_TYPED.get(c, c) for c in shown)


def escape_markdown(text: str, *, entities: bool = True) -> str:
    """Escape a string for st.markdown: HTML entities and every markdown control character.

    ``entities=False`` for st.table cells, which show raw HTML as text but do not decode
    entities (an apostrophe would read '&#x27;'): markdown characters and '<', '&' escaped
    by backslash only."""

    if entities:
        text = html.escape(text, quote=True)
        return "".join("\\" + c if c in "\\`*_{}[]()#+-.!|~>$" else c for c in text)
    return "".join("\\" + c if c in "\\`*_{}[]()#+-.!|~>$<&" else c for c in text)
