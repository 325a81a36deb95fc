"""The render layer: what draws a cache with no Streamlit.

``read`` (the cache readers, memoised per process), ``style`` (the palette, legends and fonts
every chart shares), the pages' chart builders (``alignment_charts``, ``projection_charts``,
``lens_charts``, ``dynamics_charts``, ``sweep_charts``) and tables (``paper_tables``,
``seed_tables``, ``dynamics_tables``, ``sweep_tables``, ``lens_tables``), ``figures`` (the
registry of every figure and table), ``spec`` (a chart as a Vega-Lite spec, SVG or PNG),
``pack`` (the figure pack), ``tour`` (the guided tour's steps). The app draws with it; the
writer's read-side commands (``precompute figures``, ``precompute site``) import it and
nothing else of the app.
"""
