# Hugging Face Space (sdk: docker) or any Docker host: serves the app on port 8501 with the
# caches committed under cache/ (the shipped toy-lab demo, cache/demo.duckdb, at least).
FROM python:3.11-slim

# Spaces run the container as UID 1000; give that user a home and own the app folder.
RUN useradd -m -u 1000 user
USER user
ENV HOME=/home/user \
    PATH=/home/user/.local/bin:$PATH \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    TOKENIZERS_PARALLELISM=false \
    STREAMLIT_BROWSER_GATHER_USAGE_STATS=false
WORKDIR /home/user/app

# The exact versions CI tested (requirements-dev.lock holds the same pins plus the test tools);
# the CPU index supplies the pinned torch as a CPU wheel instead of the multi-GB CUDA build.
COPY --chown=user requirements.lock .
RUN pip install --no-cache-dir --user -r requirements.lock --extra-index-url https://download.pytorch.org/whl/cpu

# The code and cache/ (see .dockerignore for what stays out).
COPY --chown=user . .

EXPOSE 8501
# streamlit run app.py, with the models slow to load (SmolLM2's GGUF, where its wheel is installed) loaded
# before the port opens: a room's first text is answered at once (explorer/serve.py)
CMD ["python", "-m", "explorer.serve", "--server.port", "8501", "--server.address", "0.0.0.0", "--server.headless", "true"]
