"""A warm worker for the app's own texts: ``python -m precompute serve-trajectory CACHE``.

It loads the cache's models and translators once (:class:`precompute.trajectory.Tracer`),
then answers requests, one JSON object a line on standard input::

    {"id": 7, "text": "--help", "top_k": 10, "max_tokens": 32}
    {"id": 8, "text": "The capital of France is", "pins": [" Paris", " Lyon"]}

with one JSON object a line on standard output, in order::

    {"id": 7, "models": {"tied": {"model": ..., "lens": ...}, ...}, "columns": {"position": [...], ...}}
    {"id": 8, "models": ..., "columns": ..., "pinned": {"pin": [...], "prob": [...], ...}, "unknown": {"tied": []}}
    {"id": 9, "error": "one line"}

``columns`` are the trajectory command's rows, column by column; with ``pins`` (at most
:data:`MAX_PINS` texts, each a token as decoded), ``pinned`` holds each pin's probability at every
model, lens, hidden state and position from the full softmax (:meth:`Tracer.follow`), and
``unknown`` per model the pins that are no single token of its vocabulary. While it loads, and while it
reads texts, it says what it is doing, at most every :data:`PROGRESS_EVERY_S` seconds (and at a
phase's first and last step)::

    {"progress": {"done": 1, "of": 2, "doing": "loading the tuned lens of the model"}}

Its first other line, once the models are loaded, is ``{"ready": true, "models": ..., "pid": ...}``; a cache it cannot load
ends it before that, with ``error: ...`` on standard error and exit code 2 (as every command).
It stops at the end of its input (the app closed the pipe, or died). A text is data, never
an option: "--help" is traced like any other. The requests waiting when it takes the next
one (up to ``--batch``) are traced together, one forward pass per model
(:meth:`Tracer.trace_many`): a queue of texts costs little more than one. A request that
fails is answered with its error (one line) and the others are served (a batch that fails
is traced again text by text); the traceback of an unexpected failure goes to standard
error, never to standard output. Nothing else is written to standard output: what a library
prints there goes to standard error.

explorer/live.py runs one per cache for the app and queues the visitors' texts to it.
"""

from __future__ import annotations

import io
import json
import math
import os
import queue
import sys
import threading
import time
import traceback
from dataclasses import dataclass
from typing import TextIO

from precompute.options import cache_dir_option, check_positive, device_option, option
from precompute.report import resolve_cache
from precompute.trajectory import Tracer, check_text
from tying.errors import UserError, first_line

MAX_PINS = 8
"""Pinned texts a request may follow (each at most 64 characters)."""

PROGRESS_EVERY_S = 0.1
"""The least time between two progress lines of one phase (its first and last always go)."""


@dataclass
class ServeConfig:
    """What `precompute serve-trajectory` does; checked when built."""

    cache: str = option(positional=True, help="a cache file (`cache/<name>.duckdb`) or a pair name in `--cache-dir`")
    cache_dir: str = cache_dir_option()
    device: str | None = device_option()
    batch: int = option(16, help="at most this many waiting texts are traced together")
    threads: int = option(1, help="CPU threads of torch (more only pays for large models on an otherwise idle CPU; "
                                  "on a busy one they wait for each other)")
    trust_remote_code: bool = option(False, help="allow model code from the model's folder (off by default)")

    def __post_init__(self) -> None:
        check_positive(self, "batch", "threads")


def check_pins(pins: object) -> list[str]:
    """A request's pins: a list of at most MAX_PINS non-empty strings of at most 64 characters."""
    if not isinstance(pins, list) or len(pins) > MAX_PINS or not all(
            isinstance(p, str) and 0 < len(p) <= 64 for p in pins):
        raise UserError(f"pins must be a list of at most {MAX_PINS} tokens (texts of 1 to 64 characters)")
    return list(dict.fromkeys(pins))


def check_request(req: object) -> tuple[object, str, int, int]:
    """(id, text, top_k, max_tokens) of a request; UserError (one line) for a bad one."""
    if not isinstance(req, dict):
        raise UserError("a request is a JSON object with a text")
    text, top_k, max_tokens = req.get("text"), req.get("top_k", 10), req.get("max_tokens", 32)
    check_text(text, "at least one visible character, please")
    if type(top_k) is not int or top_k < 1:
        raise UserError(f"top_k must be a positive integer, got {top_k!r}")
    if type(max_tokens) is not int or not 1 <= max_tokens <= 256:
        raise UserError(f"max_tokens must be between 1 and 256, got {max_tokens!r}")
    return req.get("id"), text, top_k, max_tokens


def answer(tracer: Tracer, line: str) -> str:
    """The response line to one request line (an error response when it fails; never raises)."""
    rid = None
    try:
        req = json.loads(line)
        rid = req.get("id") if isinstance(req, dict) else None
        rid, text, top_k, max_tokens = check_request(req)
        pins = check_pins(req.get("pins", []))
        rows = tracer.trace(text, top_k=top_k, max_tokens=max_tokens)
        out = {"id": rid, "models": tracer.models, "columns": rows.to_dict("list")}
        if pins:
            pinned, unknown = tracer.follow(text, pins, max_tokens=max_tokens)
            out |= {"pinned": pinned.to_dict("list"), "unknown": unknown}
        return _dumps(out)
    except json.JSONDecodeError as exc:
        error = f"not a JSON request: {exc.msg}"
    except ValueError as exc:  # a UserError, or a library function's bad argument
        error = " ".join(first_line(exc).split())
    except Exception as exc:  # the next text must still be served
        traceback.print_exc(file=sys.stderr)
        error = f"{type(exc).__name__}: {' '.join(first_line(exc).split())}"
    try:
        return _dumps({"id": rid, "error": error})
    except (TypeError, ValueError):  # an id JSON cannot write back
        return _dumps({"id": None, "error": error})


def answer_many(tracer: Tracer, lines: list[str]) -> list[str]:
    """The response lines to request lines, in order: the valid requests traced together
    (grouped by top_k and max_tokens), each one alone when their batch fails; one with pins alone."""
    out: list[str | None] = [None] * len(lines)
    groups: dict[tuple[int, int], list[tuple[int, object, str]]] = {}
    for i, line in enumerate(lines):
        try:
            req = json.loads(line)
            rid, text, top_k, max_tokens = check_request(req)
            _dumps({"id": rid})
            if req.get("pins"):
                raise ValueError("followed alone")  # pins: traced and followed by answer()
        except (ValueError, TypeError):
            out[i] = answer(tracer, line)  # says what is wrong with it
            continue
        groups.setdefault((top_k, max_tokens), []).append((i, rid, text))
    for (top_k, max_tokens), reqs in groups.items():
        try:
            rows = tracer.trace_many([text for _, _, text in reqs], top_k=top_k, max_tokens=max_tokens)
        except Exception:  # one text of them: each alone says which
            for i, _, _ in reqs:
                out[i] = answer(tracer, lines[i])
            continue
        for (i, rid, _), r in zip(reqs, rows, strict=True):
            out[i] = _dumps({"id": rid, "models": tracer.models, "columns": r.to_dict("list")})
    return out


def _read_lines(stream: TextIO, put) -> None:
    try:
        for line in stream:
            if line.strip():
                put(line)
    finally:
        put(None)


def _dumps(obj: dict) -> str:
    return json.dumps(obj, default=str, allow_nan=False)


def _protocol_stdout() -> TextIO:
    """Standard output for the responses alone: its file descriptor is kept for them, and
    descriptor 1 (and ``sys.stdout``) point at standard error from here on."""
    sys.stdout.flush()
    out = io.TextIOWrapper(os.fdopen(os.dup(1), "wb"), encoding="utf-8", newline="\n", line_buffering=True)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return out


def progress_reporter(out: TextIO, every_s: float = PROGRESS_EVERY_S):
    """``(done, of, doing)`` -> a progress line on ``out``: a phase's first and last step always,
    the steps between at most every ``every_s`` seconds."""
    last = -math.inf

    def report(done: int, of: int, doing: str) -> None:
        nonlocal last
        now = time.monotonic()
        if 0 < done < of and now - last < every_s:
            return
        last = now
        out.write(_dumps({"progress": {"done": int(done), "of": int(of), "doing": str(doing)}}) + "\n")

    return report


def run_serve(cfg: ServeConfig) -> None:
    out = _protocol_stdout()
    report = progress_reporter(out)
    report(0, 1, "starting torch")
    import torch

    torch.set_num_threads(cfg.threads)
    tracer = Tracer(resolve_cache(cfg.cache, cfg.cache_dir), cfg.device, trust_remote_code=cfg.trust_remote_code,
                    progress=report)
    out.write(_dumps({"ready": True, "models": tracer.models, "pid": os.getpid()}) + "\n")
    requests: queue.Queue[str | None] = queue.Queue()
    stdin = io.TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace")
    threading.Thread(target=_read_lines, args=(stdin, requests.put), daemon=True).start()
    ended = False
    try:
        while not ended:
            batch = [requests.get()]
            while batch[-1] is not None and len(batch) < cfg.batch:
                try:
                    batch.append(requests.get_nowait())
                except queue.Empty:
                    break
            if batch[-1] is None:  # the end of the input
                batch.pop()
                ended = True
            if batch:
                out.write("".join(line + "\n" for line in answer_many(tracer, batch)))
    except (KeyboardInterrupt, BrokenPipeError):  # the app went away
        pass
