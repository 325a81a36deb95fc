"""The one error type a user is shown: a clear one-line message and exit code 2."""


class UserError(Exception):
    """Bad input the user can fix (a path, an id, a parameter).

    The CLI prints ``error: <message>`` on one line and exits with code 2; nothing is written.
    """

    exit_code = 2

    def __init__(self, message: str):
        super().__init__(" ".join(str(message).split()))


class NotApplicable(Exception):
    """An analysis that does not apply to these inputs (e.g. orthogonal map across widths)."""
