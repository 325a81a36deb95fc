"""The trajectory worker: one ``python -m precompute serve-trajectory`` child process per cache,
so that the app's own process never imports torch, and the queue of texts waiting for it.

* :class:`Job`: one text in the queue, then its answer (or one-line error).
* :class:`Worker`: the process and its queue, served by one thread that sends the waiting
  texts (up to ``BATCH``) and reads their answers. The process starts on the first text (or
  when the page shows the form: :meth:`Worker.warm`) and stops after ``IDLE_S`` without
  texts. One that dies (killed, out of memory) is started again and its texts in flight sent
  again, each alone; a text it dies on twice, or that goes ``TIMEOUT_S`` without an answer,
  gets a one-line error, and the next texts are served by a fresh process.

The text goes in on the worker's standard input, as JSON: it is data, never a command-line
option. What the process says it is doing (loading the models and lenses, reading a text
through each lens) is kept as :attr:`Worker.status`, and read by the texts waiting for it
(:meth:`Job.progress`, :meth:`Job.doing`). The app reaches the workers through :mod:`explorer.live`.
"""

from __future__ import annotations

import itertools
import json
import queue
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

import pandas as pd

from explorer import data
from tying.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
TIMEOUT_S = 120.0  # the longest the worker may go without an answer, once it has texts
BATCH = 16  # texts sent to the worker at a time (it traces those waiting together)
START_TIMEOUT_S = 300.0  # the worker's start: torch and the models
IDLE_S = 1800.0  # a worker without texts this long is stopped (and started again on demand)
WARM_RETRY_S = 300.0  # after a failed start, showing the form does not start the worker again for this long
ATTEMPTS = 2  # a text whose worker died is tried on a fresh worker this many times in all

_ids = itertools.count(1)


def worker_command(cache_path: str) -> list[str]:
    """The worker's command line: the text never appears on it (it goes in on standard input)."""
    return [sys.executable, "-m", "precompute", "serve-trajectory", cache_path]


class Job:
    """One text in a worker's queue, then its answer (or one-line error)."""

    def __init__(self, key: tuple, text: str, top_k: int, max_tokens: int,
                 on_done: Callable[[Job], None] | None = None, pins: tuple[str, ...] = ()):
        self.key, self.text, self.top_k, self.max_tokens = key, text, top_k, max_tokens
        self.pins = tuple(pins)  # tokens (as decoded) whose probability the worker reads at every cell
        self.id = next(_ids)
        self.attempts = 0  # times the worker died with it in flight
        self.worker: Worker | None = None
        self.queued_ahead = 0  # texts ahead of it when it was queued
        self._on_done = on_done
        self._event = threading.Event()
        self._answer: dict | None = None
        self._error: str | None = None
        self._parsed: tuple[pd.DataFrame, dict] | None = None
        self._pinned: tuple[pd.DataFrame, dict] | None = None
        self._lock = threading.Lock()

    def done(self) -> bool:
        return self._event.is_set()

    @property
    def ok(self) -> bool:
        return self.done() and self._error is None

    def wait(self, timeout: float | None = None) -> bool:
        """Whether it is answered, after waiting at most ``timeout`` seconds."""
        return self._event.wait(timeout)

    def ahead(self) -> int:
        """Texts before this one in its worker's queue (the one being traced included)."""
        return 0 if self.done() or self.worker is None else self.worker.position(self)

    def progress(self) -> float:
        """Of its wait, the share done: while texts are ahead of it, those answered since it was
        queued; once it is next, the share of the steps its worker said it has done (loading the
        models and lenses, then reading the text through each lens, hidden state by hidden state)."""
        if self.done():
            return 1.0
        ahead = self.ahead()
        status = self.worker.status if self.worker is not None and not ahead else None
        if status is not None:
            done, of, _ = status
            return min(1.0, max(0.0, done / of)) if of > 0 else 0.0
        return min(1.0, (self.queued_ahead - ahead) / (self.queued_ahead + 1))

    def doing(self) -> str | None:
        """What its worker says it is doing, once no text is ahead of it (None: nothing said)."""
        if self.done() or self.worker is None or self.ahead():
            return None
        status = self.worker.status
        return status[2] if status is not None else None

    def starting(self) -> bool:
        """Whether its worker is loading the models (the first text, or after a restart)."""
        return not self.done() and self.worker is not None and self.worker.starting

    def result(self, timeout: float | None = None) -> tuple[pd.DataFrame, dict]:
        """(rows with tokens made visible, {role: {"model": folder, "lens": translator or None}}).
        Raises UserError with a one-line message when the text could not be traced."""
        if not self._event.wait(timeout):
            raise UserError(f"no answer within {timeout:.0f} s")
        if self._error is not None:
            raise UserError(self._error)
        with self._lock:  # parsed once, by whoever asks first
            if self._parsed is None:
                self._parsed = (data.visible_trajectory(pd.DataFrame(self._answer["columns"])),
                                self._answer["models"])
                self._pinned = (pd.DataFrame(self._answer.get("pinned") or
                                             {c: [] for c in ("model", "lens", "layer", "position", "pin", "prob")}),
                                self._answer.get("unknown") or {})
                self._answer = None
            return self._parsed

    def pinned(self) -> tuple[pd.DataFrame, dict[str, list[str]]]:
        """(each pin's probability from the full softmax: rows model, lens, layer, position, pin (as
        sent), prob; {role: the pins that are no single token of that model}), once answered."""
        self.result()
        return self._pinned

    def finish(self, answer: dict | None = None, error: str | None = None) -> None:
        if self.done():
            return
        self._answer, self._error = answer, error
        self._event.set()
        if self._on_done is not None:
            self._on_done(self)


class _Died(Exception):
    """The worker process ended (or its pipe broke)."""


class _StartFailed(Exception):
    """The worker could not load the cache's models (its one-line error)."""


def _pump(stream, put: Callable[[str | None], None]) -> None:
    try:
        for line in stream:
            put(line)
    except (OSError, ValueError):
        pass
    finally:
        put(None)


class Worker:
    """One ``serve-trajectory`` process for one cache and the queue of texts waiting for it."""

    def __init__(self, cache_path: str, command: list[str] | None = None, *, timeout_s: float = TIMEOUT_S,
                 start_timeout_s: float = START_TIMEOUT_S, idle_s: float = IDLE_S, batch: int = BATCH):
        self.cache_path = cache_path
        self.command = command or worker_command(cache_path)
        self.timeout_s, self.start_timeout_s, self.idle_s, self.batch = timeout_s, start_timeout_s, idle_s, batch
        self.starting = False
        self.status: tuple[int, int, str] | None = None  # the process's last (done, of, doing)
        self.starts = 0  # processes started
        self.sent = 0  # requests written to a process
        self.writes = 0  # times texts were written (the waiting ones together)
        self.pid: int | None = None
        self._failed_at = -WARM_RETRY_S  # when a start last failed (time.monotonic)
        self._cond = threading.Condition()
        self._queue: deque[Job] = deque()
        self._inflight: list[Job] = []  # the texts the process has now
        self._warm = False
        self._closing = False  # no new texts; stop once the queue is served
        self._proc: subprocess.Popen | None = None
        self._lines: queue.Queue | None = None
        self._stderr: deque[str] = deque(maxlen=50)
        self._thread: threading.Thread | None = None

    # -- the app's side ---------------------------------------------------------------------
    def submit(self, job: Job) -> None:
        with self._cond:
            if self._closing:
                raise UserError("the model worker of this cache is being replaced; try again")
            job.worker = self
            job.queued_ahead = len(self._queue) + len(self._inflight)
            self._queue.append(job)
            self._start_thread()
            self._cond.notify()

    def warm(self) -> None:
        """Start the process now (in the background) if it is not running."""
        with self._cond:
            if not self._closing and time.monotonic() - self._failed_at >= WARM_RETRY_S:
                self._warm = True
                self._start_thread()
                self._cond.notify()

    def position(self, job: Job) -> int:
        with self._cond:
            try:
                return self._queue.index(job) + len(self._inflight)
            except ValueError:  # being traced (or answered)
                return 0

    def waiting(self) -> int:
        """Texts queued or in flight."""
        with self._cond:
            return len(self._queue) + len(self._inflight)

    def close(self, *, drain: bool = False) -> None:
        """Stop taking texts; stop the process now (the queued texts get an error) or, with
        ``drain``, once the queued texts are answered."""
        with self._cond:
            self._closing = True
            if not drain:
                jobs, self._queue = list(self._queue), deque()
            else:
                jobs = []
            proc = self._proc
            self._cond.notify()
        for job in jobs:
            job.finish(error="the model worker was stopped")
        if proc is not None and not drain:
            proc.kill()

    # -- the worker's thread ----------------------------------------------------------------
    def _start_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._loop, name=f"trajectory-worker {self.cache_path}",
                                            daemon=True)
            self._thread.start()

    def _take(self) -> list[Job]:
        """The next texts to send: up to ``batch`` waiting ones, or alone one that a worker
        died on (so that a text that kills it does not take others down with it)."""
        if self._queue and self._queue[0].attempts:
            return [self._queue.popleft()]
        jobs = []
        while self._queue and len(jobs) < self.batch and not self._queue[0].attempts:
            jobs.append(self._queue.popleft())
        return jobs

    def _loop(self) -> None:
        while True:
            idle = False
            with self._cond:
                while not (self._queue or self._warm or self._closing):
                    if not self._cond.wait(timeout=self.idle_s) and not self._queue:
                        idle = True
                        break
                if self._closing and not self._queue:
                    break
                jobs = self._inflight = self._take()
                self._warm = False
            if idle:
                self._stop_process()
                continue
            if not jobs:  # warm-up only
                try:
                    self._ensure_started()
                except (_Died, _StartFailed):
                    self._failed_at = time.monotonic()
                    self._stop_process()  # the first text will try again and say why
                continue
            try:
                self._serve(jobs)
            except Exception as exc:  # never leave a visitor waiting
                self._stop_process(kill=True)
                for job in jobs:
                    job.finish(error=f"the model worker failed: {type(exc).__name__}")
            with self._cond:
                self._inflight = []
        self._stop_process()

    def _serve(self, jobs: list[Job]) -> None:
        try:
            self._ensure_started()
            self._ask(jobs)
        except _StartFailed as exc:
            self._failed_at = time.monotonic()
            self._stop_process()
            with self._cond:  # they would fail the same way: tell them now
                rest, self._queue = list(self._queue), deque()
            for job in [*jobs, *rest]:
                job.finish(error=str(exc))
        except _Died:
            self._stop_process(kill=True)
            again = []
            for job in jobs:
                if job.done():
                    continue
                job.attempts += 1
                if self._closing:
                    job.finish(error="the model worker was stopped")
                elif job.attempts >= ATTEMPTS:
                    job.finish(error="the model worker stopped while tracing this text, twice; try another text")
                else:
                    again.append(job)
            with self._cond:  # to a fresh worker first, each alone
                self._queue.extendleft(reversed(again))
        except TimeoutError:
            self._stop_process(kill=True)
            for job in jobs:
                job.finish(error=f"the models took longer than {self.timeout_s:g} s on this text")

    def _ensure_started(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            return
        self._stop_process()
        self.starting = True
        self.status = None
        try:
            proc = subprocess.Popen(self.command, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True, encoding="utf-8", errors="replace",
                                    bufsize=1, start_new_session=True)
            lines: queue.Queue = queue.Queue()
            self._stderr = stderr = deque(maxlen=50)
            threading.Thread(target=_pump, args=(proc.stdout, lines.put), daemon=True).start()
            errs = threading.Thread(target=_pump, args=(proc.stderr, lambda ln: ln is not None and stderr.append(ln)),
                                    daemon=True)
            errs.start()
            self._proc, self._lines = proc, lines
            self.starts += 1
            deadline = time.monotonic() + self.start_timeout_s
            while True:  # what it says while it loads, then its ready line
                try:
                    line = lines.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    raise _StartFailed(f"the models did not load within {self.start_timeout_s:g} s") from None
                if not self._said_progress(line):
                    break
        finally:
            self.starting = False
        if line is None:
            rc = proc.wait()
            if rc < 0:  # killed by a signal: worth another try
                raise _Died
            errs.join(timeout=5)
            errors = [ln.removeprefix("error:").strip() for ln in list(stderr) if ln.startswith("error:")]
            raise _StartFailed(errors[-1] if errors else f"the model worker could not start (exit {rc})")
        try:
            ready = json.loads(line)
        except ValueError:
            ready = {}
        if not isinstance(ready, dict) or not ready.get("ready"):
            raise _StartFailed("the model worker did not say it was ready")
        self.pid = proc.pid

    def _ask(self, jobs: list[Job]) -> None:
        """Send the texts and finish each job as its answer comes (the process traces waiting
        texts together). _Died when the process ends first, TimeoutError when it goes
        ``timeout_s`` without an answer."""
        requests = "".join(json.dumps({"id": j.id, "text": j.text, "top_k": j.top_k, "max_tokens": j.max_tokens}
                                      | ({"pins": list(j.pins)} if j.pins else {})) + "\n" for j in jobs)
        self.status = None  # what it said of its start or of the texts before these
        try:
            self._proc.stdin.write(requests)
            self._proc.stdin.flush()
        except (OSError, ValueError):
            raise _Died from None
        self.sent += len(jobs)
        self.writes += 1
        waiting = {j.id: j for j in jobs}
        while waiting:
            try:
                line = self._lines.get(timeout=self.timeout_s)
            except queue.Empty:
                raise TimeoutError from None
            if line is None:
                raise _Died
            if self._said_progress(line):
                continue
            try:
                answer = json.loads(line)
                job = waiting.pop(answer.get("id"))
            except (ValueError, AttributeError, KeyError, TypeError):
                continue  # not an answer to these texts
            if "error" in answer:
                job.finish(error=" ".join(str(answer["error"]).split()) or "the text could not be traced")
            else:
                job.finish(answer=answer)

    def _said_progress(self, line: str | None) -> bool:
        """Whether ``line`` is a progress line (``{"progress": {"done", "of", "doing"}}``); it is
        then kept as :attr:`status`."""
        if not line or not line.startswith('{"progress"'):
            return False
        try:
            said = json.loads(line)["progress"]
            self.status = (int(said["done"]), int(said["of"]), str(said["doing"]))
        except (ValueError, KeyError, TypeError):
            return False
        return True

    def _stop_process(self, *, kill: bool = False) -> None:
        self.status = None
        proc, self._proc, self._lines, self.pid = self._proc, None, None, None
        if proc is None:
            return
        if not kill:
            try:
                proc.stdin.close()  # the worker stops at the end of its input
                proc.wait(timeout=10)
                return
            except (OSError, subprocess.TimeoutExpired):
                pass
        proc.kill()
        proc.wait()

