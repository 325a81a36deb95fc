"""The floor of bench/bench_concurrency.py: a Streamlit app whose one page draws nothing, so a
run costs what Streamlit itself costs per run on this machine (session, script run, messages)."""
