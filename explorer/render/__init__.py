"""The render layer: what draws a cache with no Streamlit.

``read`` (the cache readers, memoised per process), ``charts`` and ``tables`` (the pages'
chart and table builders), ``figures`` (the registry of every figure and table),
``spec`` (a chart as a Vega-Lite spec, SVG or PNG), ``pack`` (the figure pack), ``tour``
(the guided tour's steps). The app draws with it; the writer's read-side commands
(``precompute figures``, ``precompute site``) import it and nothing else of the app.
"""
