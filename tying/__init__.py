"""Core library of the weight-tying explorer.

Numerics (alignment, neighbours, spectra, projections) are pure functions on arrays;
loading and the cache live in their own modules. Both `precompute/` (the writer) and the
Streamlit app (the reader) import from here.
"""

import tomllib
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

DISTRIBUTION = "weight-tying-explorer"


def _version() -> str:
    """The version pyproject.toml declares, its one source.

    From the source tree's pyproject.toml when this package sits in it (a checkout, the
    Docker image), else from the installed distribution's metadata (a wheel).
    """

    try:
        project = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())["project"]
        if project.get("name") == DISTRIBUTION:
            return project["version"]
    except (OSError, KeyError, tomllib.TOMLDecodeError):
        pass
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


__version__ = _version()
