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


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message, or its type's name when it has none."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
