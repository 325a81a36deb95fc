"""``python -m explorer.serve [streamlit run's options]``: the app's server, with the models that are
slow to load already loading.

``streamlit run app.py`` runs ``app.py`` only when a first browser opens a page, so the warm-up
there (:func:`explorer.live.warm_at_start`: SmolLM2's GGUF, tens of seconds) starts with the first
visitor, who then waits for it (on 2 cores: the worker's imports and the GGUF load, about 10 s,
beside the first page's own 5 s). This entry point starts the same warm-up in the server's own
process and opens the port once the models are loaded (at most :data:`READY_TIMEOUT_S`), then
runs Streamlit exactly as ``streamlit run app.py`` would (its options pass through): Streamlit's
resource cache is the process's, so app.py's call finds the loaded worker. The Docker image (a
Space, where a room opens the app at once) starts the app this way. The process imports no
torch: the worker is a process of its own.
"""

from __future__ import annotations

import sys
from pathlib import Path

APP = Path(__file__).resolve().parent.parent / "app.py"
READY_TIMEOUT_S = 180.0  # the longest the server waits for its models before it opens anyway


def main(argv: list[str] | None = None) -> None:
    from streamlit.web import cli

    from explorer import data, live

    # the port opens once a first text can be answered at once (a Space shows "starting" until then)
    live.ready_at_start(str(data.cache_dir()), READY_TIMEOUT_S)
    cli.main(["run", str(APP), *(sys.argv[1:] if argv is None else argv)], prog_name="streamlit")


if __name__ == "__main__":
    main()
