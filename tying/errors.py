"""The one error type a user is shown: a clear one-line message and exit code 2."""


class UserError(ValueError):
    """Bad input the user can fix (a path, an id, a parameter), found by a command or a reader.

    The CLI prints ``error: <message>`` on one line and exits with code 2; nothing is written.
    Numerical library functions raise plain ``ValueError`` for bad arguments; the CLI turns
    those into the same one line (a ``UserError`` is a ``ValueError`` too).
    """

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class NotApplicable(Exception):
    """An analysis that does not apply to these inputs (e.g. orthogonal map across widths)."""


def first_line(exc: BaseException, *, typed: bool = False, limit: int | None = None) -> str:
    """The first line of an exception's message, or its type's name when it has none.

    typed: prefix the line with the exception's type ("KeyError: 'lm_head'"), for errors
    from a library whose message alone may be a bare key, path or code. limit: cut a longer
    line to this many characters, ending in "...".
    """
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    if limit is not None and len(line) > limit:
        line = line[: max(0, limit - 3)] + "..."
    if not line:
        return type(exc).__name__
    return f"{type(exc).__name__}: {line}" if typed else line
