"""The numerics, pure functions on arrays: alignment, neighbours and overlap@k, spectral distance, projections, output share, lens convergence, sweep statistics."""
