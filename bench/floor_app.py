"""The floor of bench/bench_concurrency.py: a Streamlit app whose one page draws nothing, so a
run costs what Streamlit itself costs per run on this machine (session, script run, messages);
with ``?elements=N`` it draws N captions, the cheapest element: Streamlit's cost for a page of
N elements and no work of its own (the element floor)."""

import streamlit as st

try:  # ?elements=N: the page draws N captions (the element floor)
    n = max(0, min(int(st.query_params.get("elements", 0)), 1000))
except ValueError:
    n = 0
for i in range(n):
    st.caption(f"element {i}")
