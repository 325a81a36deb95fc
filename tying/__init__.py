"""Core library of the weight-tying explorer.

Numerics (alignment, neighbours, spectra, projections) are pure functions on arrays;
loading and the cache live in their own modules. Both `precompute/` (the writer) and the
Streamlit app (the reader) import from here.
"""

__version__ = "0.1.0"
