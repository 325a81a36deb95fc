"""The Lens page's own texts: the warm worker (`python -m precompute serve-trajectory`) and the
app's client of it (explorer/live.py, explorer/trajectory_worker.py): queue, kept answers, crash survival, texts as data.

Most client tests run against a fake worker (a few lines of Python speaking the same JSON
lines), so they are fast and need no torch; the known answers and the crash of a real worker
run the real one on the shipped demo cache.
"""

from __future__ import annotations

import io
import json
import os
import signal
import sys
import time
from contextlib import redirect_stdout
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from explorer import data, live, trajectory_worker
from precompute import serve
from precompute.cli import main
from tests.waiting import wait_until
from tying.errors import UserError

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / "cache" / "demo.duckdb"
TEXT = "import os\nfor name in os.listdir('.'):\n    print(name)"

FAKE_WORKER = r'''
import json, os, sys, time
log = open(sys.argv[1], "a") if len(sys.argv) > 1 else None
if os.environ.get("FAKE_START_ERROR"):
    print("error: " + os.environ["FAKE_START_ERROR"], file=sys.stderr)
    sys.exit(2)
def wait_for(name):  # until the test releases it (or 60 s pass)
    gate = os.path.join(os.path.dirname(sys.argv[1]), name)
    deadline = time.monotonic() + 60
    while not os.path.exists(gate) and time.monotonic() < deadline:
        time.sleep(0.01)
def progress(done, of, doing):
    print(json.dumps({"progress": {"done": done, "of": of, "doing": doing}}), flush=True)
if os.environ.get("FAKE_LOAD_GATE"):  # a load that says what it does, until released
    progress(1, 2, "loading the model (tiny.gguf)")
    wait_for(os.environ["FAKE_LOAD_GATE"])
    progress(2, 2, "ready")
print(json.dumps({"ready": True, "models": {}, "pid": os.getpid()}), flush=True)
for line in sys.stdin:
    req = json.loads(line)
    if log:
        log.write(req["text"] + "\n"); log.flush()
    text = req["text"]
    if text.startswith("die"):
        os._exit(1)
    if text.startswith("sleep:"):  # a slow text
        time.sleep(float(text.split(":")[1].split()[0]))
    if text.startswith("hold:"):  # a text traced until the test releases it (or 60 s pass)
        if os.environ.get("FAKE_TRACE_PROGRESS"):
            progress(3, 4, "reading your text: tuned lens, hidden state 2 of 3")
        wait_for(text.split(":")[1].split()[0])
    if text.startswith("fail"):
        print(json.dumps({"id": req["id"], "error": "no text to trace predictions on"}), flush=True)
        continue
    cols = {"position": [], "token": [], "layer": [], "lens": [], "rank": [], "prediction": [], "prob": [],
            "model": []}
    for model in ("tied", "untied"):
        for lens in ("tuned", "logit"):
            for layer in range(3):
                for rank in (1, 2):
                    for k, v in (("position", 0), ("token", text), ("layer", layer), ("lens", lens),
                                 ("rank", rank), ("prediction", "x" if rank == 1 else "y"),
                                 ("prob", 0.6 if rank == 1 else 0.3), ("model", model)):
                        cols[k].append(v)
    print(json.dumps({"id": req["id"], "models": {"tied": {"model": "m", "lens": None}}, "columns": cols}),
          flush=True)
'''


@pytest.fixture
def fake(tmp_path):
    """Tracers(...) against the fake worker; ``.log`` lists the texts it was sent; a text
    ``hold:NAME`` is traced until ``.release(NAME)``."""
    script = tmp_path / "fake_worker.py"
    script.write_text(FAKE_WORKER)
    log = tmp_path / "sent.txt"
    made = []

    def make(**options) -> live.Tracers:
        t = live.Tracers(command=lambda path: [sys.executable, str(script), str(log)], **options)
        made.append(t)
        return t

    make.log = lambda: log.read_text().splitlines() if log.exists() else []
    make.release = lambda name: (tmp_path / name).touch()
    yield make
    for t in made:
        t.close()


@pytest.fixture
def ref(tmp_path) -> data.CacheRef:
    cache = tmp_path / "fake.duckdb"
    cache.write_bytes(b"")
    return data.CacheRef.of(cache)


def _visible(text: str) -> str:
    return text.replace("␣", " ")


# -- the client against the fake worker ------------------------------------------------------
def test_a_repeated_text_is_answered_from_the_kept_answers(fake, ref):
    tracers = fake()
    rows, _ = tracers.submit(ref, "hello").result(timeout=60)
    assert len(rows) == 24 and fake.log() == ["hello"]
    worker = tracers.worker(ref)
    sent = worker.sent
    t = time.perf_counter()
    again = tracers.submit(ref, "hello")
    assert again.done() and again.result()[0] is rows  # the same frame, parsed once
    assert time.perf_counter() - t < 0.05 and worker.sent == sent and tracers.hits == 1
    assert fake.log() == ["hello"]  # no second request
    # two visitors with one text while it waits: one job, one request
    a, b = tracers.submit(ref, "hold:ab"), tracers.submit(ref, "hold:ab")
    assert a is b
    fake.release("ab")
    a.result(timeout=60)
    assert fake.log() == ["hello", "hold:ab"]


def test_the_kept_answers_are_the_last_ones(fake, ref):
    tracers = fake(results=2)
    for text in ("a", "b", "c"):
        tracers.submit(ref, text).result(timeout=60)
    assert tracers.submit(ref, "c").done() and tracers.submit(ref, "b").done()
    tracers.submit(ref, "a").result(timeout=60)  # the oldest was let go: asked again
    assert fake.log() == ["a", "b", "c", "a"] and tracers.hits == 2


def test_a_visitor_sees_their_place_in_the_queue(fake, ref):
    tracers = fake(batch=1)
    jobs = [tracers.submit(ref, "hold:first #0")] + [tracers.submit(ref, f"text #{i}") for i in range(1, 4)]
    wait_until(lambda: tracers.worker(ref).starts and not jobs[0].starting(), timeout=60, interval=0.02,
               what="the first text in the started worker")
    assert [j.ahead() for j in jobs] == [0, 1, 2, 3]
    assert live.waiting_line(jobs[3]) == "3 texts ahead of yours…"
    assert live.waiting_line(jobs[1]) == "1 text ahead of yours…"
    assert live.waiting_line(jobs[0]).startswith("Running the tied and untied models")
    assert jobs[3].queued_ahead == 3 and 0 <= jobs[3].progress() < 1
    fake.release("first")
    jobs[1].result(timeout=60)
    assert jobs[3].ahead() <= 1 and jobs[3].progress() >= 0.5
    for j in jobs:
        j.result(timeout=60)
    assert [j.ahead() for j in jobs] == [0, 0, 0, 0] and jobs[3].progress() == 1.0


def test_the_wait_names_one_model_as_one_and_says_what_the_worker_is_doing(fake, ref, monkeypatch):
    unsent = live.Job(("k",), "a text", 5, 32)  # nothing said yet: the models it runs, named
    assert live.waiting_line(unsent, ["tied"]) == "Running the model on your text…"
    assert live.waiting_line(unsent, ["tied", "untied"]) == "Running the tied and untied models on your text…"
    monkeypatch.setenv("FAKE_LOAD_GATE", "loaded")
    monkeypatch.setenv("FAKE_TRACE_PROGRESS", "1")
    tracers = fake(batch=1)
    job, second = tracers.submit(ref, "hold:traced #1"), tracers.submit(ref, "#2")
    wait_until(job.doing, timeout=60, interval=0.02, what="the worker saying what it loads")
    assert live.waiting_line(job, ["tied"]) == "Loading the model (tiny.gguf)…" and job.progress() == 0.5
    assert live.waiting_line(second, ["tied"]) == "1 text ahead of yours (the model is loading: once)…"
    assert second.doing() is None and second.progress() == 0.0  # its share is its place in the queue
    fake.release("loaded")
    wait_until(lambda: (job.doing() or "").startswith("reading"), timeout=60, interval=0.02,
               what="the worker reading the text")
    assert live.waiting_line(job, ["tied"]) == "Reading your text: tuned lens, hidden state 2 of 3…"
    assert job.progress() == 0.75
    fake.release("traced")
    assert job.result(timeout=60) and second.result(timeout=60)
    assert job.progress() == second.progress() == 1.0 and tracers.worker(ref).status is None


def test_waiting_texts_go_to_the_worker_together(fake, ref):
    tracers = fake()
    first = tracers.submit(ref, "hold:first")
    jobs = [tracers.submit(ref, f"text {i}") for i in range(20)]
    fake.release("first")
    for j in [first, *jobs]:
        j.result(timeout=60)
    worker = tracers.worker(ref)
    assert worker.sent == 21 and worker.starts == 1
    # sent together, at most 16 a write: the first alone and the 20 that waited as 16 and 4, or (a
    # slow start, the first still queued) 16 and 5; never a write per text
    assert 2 <= worker.writes <= 3


def test_a_text_that_kills_the_worker_gets_one_line_and_the_others_are_answered(fake, ref):
    tracers = fake()
    before = tracers.submit(ref, "hold:before")
    jobs = [tracers.submit(ref, t) for t in ("one", "die now", "two")]  # sent together, after the first
    fake.release("before")
    before.result(timeout=60)
    one, poison, two = jobs
    assert one.result(timeout=60) and two.result(timeout=60)  # tried again, each alone, on a fresh worker
    with pytest.raises(UserError) as err:
        poison.result(timeout=60)
    assert str(err.value) == "the model worker stopped while tracing this text, twice; try another text"
    assert fake.log().count("die now") == 2
    assert tracers.submit(ref, "after").result(timeout=60)  # later texts work
    assert not tracers.submit(ref, "die now").done()  # an error is not kept: asked again, it is tried again


def test_an_error_of_the_worker_is_one_line_and_not_kept(fake, ref):
    tracers = fake()
    for _ in range(2):
        with pytest.raises(UserError, match="^no text to trace predictions on$"):
            tracers.submit(ref, "fail").result(timeout=60)
    assert fake.log() == ["fail", "fail"] and tracers.worker(ref).starts == 1


def test_a_worker_that_cannot_start_says_why_to_every_waiting_text(fake, ref, monkeypatch):
    monkeypatch.setenv("FAKE_START_ERROR", "the models of fake.duckdb are not on this machine")
    tracers = fake()
    jobs = [tracers.submit(ref, f"t{i}") for i in range(3)]
    for j in jobs:
        with pytest.raises(UserError, match="^the models of fake.duckdb are not on this machine$"):
            j.result(timeout=60)
    assert tracers.worker(ref).starts == 1  # not once per text
    monkeypatch.delenv("FAKE_START_ERROR")
    assert tracers.submit(ref, "t0").result(timeout=60)  # the next text tries again


def _failed_lately(worker: live.Worker) -> bool:
    """Whether the worker has noted its failed start (warm() then leaves it for WARM_RETRY_S).
    Nothing public says so: the worker's thread notes it after every public sign of the failure."""
    return time.monotonic() - worker._failed_at < trajectory_worker.WARM_RETRY_S


def test_showing_the_form_starts_the_worker_once(fake, ref, monkeypatch):
    tracers = fake()
    tracers.warm(ref)
    worker = tracers.worker(ref)
    pid = wait_until(lambda: worker.pid, timeout=60, interval=0.02, what="the warmed worker's process")
    tracers.warm(ref)
    assert tracers.submit(ref, "a").result(timeout=60) and worker.starts == 1
    assert worker.pid == pid  # the text after the second warm-up was served by the first process
    # a worker that cannot start is not started again on every rerun of the page
    monkeypatch.setenv("FAKE_START_ERROR", "cannot load")
    other = data.CacheRef(ref.name, ref.path, ref.mtime_ns + 1)
    tracers.warm(other)
    broken = tracers.worker(other)
    wait_until(lambda: broken.starts == 1 and _failed_lately(broken), timeout=60, interval=0.02,
               what="the warm-up's failed start, noted")
    tracers.warm(other)  # the page shown again
    # warm() decides at once, under the worker's lock: it asked nothing of the worker's thread ...
    assert not broken._warm and not broken.starting and broken.starts == 1
    with pytest.raises(UserError, match="^cannot load$"):  # a text still tries, and says why
        tracers.submit(other, "b").result(timeout=60)
    # ... and the text's start is the only one since: a start asked by that warm() and taken before
    # the text would have made it 3
    assert broken.starts == 2


def test_a_text_that_takes_too_long_gets_one_line_and_a_fresh_worker_serves_on(fake, ref):
    tracers = fake(timeout_s=0.5)
    with pytest.raises(UserError, match=r"^the models took longer than 0.5 s on this text$"):
        tracers.submit(ref, "sleep:30").result(timeout=60)
    assert tracers.submit(ref, "quick").result(timeout=60)
    assert tracers.worker(ref).starts == 2


def test_texts_the_page_would_not_send_are_refused_before_the_queue(fake, ref):
    tracers = fake()
    for text, message in (("", "type some text first"), ("  \n", "type some text first"),
                          ("x" * (live.MAX_CHARS + 1), f"at most {live.MAX_CHARS} characters")):
        with pytest.raises(UserError, match=message):
            tracers.submit(ref, text)
    assert fake.log() == [] and tracers.worker(ref).starts == 0


def test_a_rebuilt_cache_gets_a_fresh_worker(fake, ref):
    tracers = fake()
    tracers.submit(ref, "a").result(timeout=60)
    old = tracers.worker(ref)
    newer = data.CacheRef(ref.name, ref.path, ref.mtime_ns + 1)
    assert not tracers.submit(newer, "a").done()  # not the old cache's answer
    tracers.submit(newer, "a").result(timeout=60)
    assert tracers.worker(newer) is not old


# -- the worker's request handling, without models ---------------------------------------------
class _FakeTracer:
    def __init__(self):
        self.models = {"tied": {"model": "m", "lens": None}}

    def trace(self, text, *, top_k, max_tokens):
        if text == "bad":
            raise UserError("no text to trace predictions on")
        return pd.DataFrame({"token": [text], "top_k": [top_k], "max_tokens": [max_tokens]})

    def trace_many(self, texts, *, top_k, max_tokens):
        if "bad" in texts:
            raise UserError("one of them")
        return [self.trace(t, top_k=top_k, max_tokens=max_tokens) for t in texts]


def test_the_worker_answers_every_request_line_in_order():
    lines = ['{"id": 1, "text": "--help"}', "not json", '{"id": 3, "text": "   "}', '{"id": 4, "text": "bad"}',
             '{"id": 5, "text": "-- a dash", "top_k": 2}', '{"id": 6, "text": "x", "max_tokens": 999}',
             '{"id": 7, "text": "y", "top_k": "5"}', '[1, 2]', '{"id": 9, "text": "ok"}']
    out = [json.loads(x) for x in serve.answer_many(_FakeTracer(), lines)]
    assert [o.get("id") for o in out] == [1, None, 3, 4, 5, 6, 7, None, 9]
    assert out[0]["columns"]["token"] == ["--help"] and out[8]["columns"]["token"] == ["ok"]
    assert out[4]["columns"] == {"token": ["-- a dash"], "top_k": [2], "max_tokens": [32]}
    assert [(o["id"], o["error"]) for o in out if "error" in o] == [
        (None, "not a JSON request: Expecting value"),
        (3, "no text: at least one visible character, please"),
        (4, "no text to trace predictions on"),  # its batch failed: each text alone says which
        (6, "max_tokens must be between 1 and 256, got 999"),
        (7, "top_k must be a positive integer, got '5'"),
        (None, "a request is a JSON object with a text")]
    assert serve.answer(_FakeTracer(), "not json") == '{"id": null, "error": "not a JSON request: Expecting value"}'


# -- the real worker on the shipped demo cache --------------------------------------------------
@pytest.fixture(scope="module")
def real():
    tracers = live.Tracers()
    yield tracers
    tracers.close()


@pytest.fixture(scope="module")
def demo() -> data.CacheRef:
    return data.CacheRef.of(DEMO)


@pytest.mark.slow
def test_the_worker_answers_what_the_one_shot_command_does(real, demo):
    buf = io.StringIO()
    with redirect_stdout(buf):
        assert main(["trajectory", str(DEMO), "--text", TEXT, "--top-k", "3", "--max-tokens", "12"]) == 0
    once = json.loads(buf.getvalue())
    expected = data.visible_trajectory(pd.DataFrame(once["rows"]))
    rows, used = real.submit(demo, TEXT, top_k=3, max_tokens=12).result(timeout=300)
    assert used == once["models"] and all(used[r]["lens"] for r in ("tied", "untied"))
    assert list(rows.columns) == list(expected.columns) and len(rows) == len(expected) > 0
    for col in rows.columns:
        if col == "prob":
            np.testing.assert_allclose(rows[col].to_numpy(), expected[col].to_numpy(), rtol=1e-6, atol=1e-9)
        else:
            assert rows[col].tolist() == expected[col].tolist(), col


@pytest.mark.slow
def test_texts_traced_together_are_those_traced_alone():
    from precompute.trajectory import Tracer

    tracer = Tracer(DEMO, "cpu")
    texts = [TEXT, "--help", "-- a dash", "x", "The cat sat on the mat, and then it sat on the dog."]
    for alone, together in zip([tracer.trace(t) for t in texts], tracer.trace_many(texts), strict=True):
        pd.testing.assert_frame_equal(alone.drop(columns=["prob", "prediction"]),
                                      together.drop(columns=["prob", "prediction"]))
        np.testing.assert_allclose(alone["prob"], together["prob"], atol=1e-5)
        # the same predictions wherever the neighbouring ranks are not near ties
        cell = alone.groupby(["model", "lens", "layer", "position"])["prob"]
        clear = ((cell.diff(1).abs().fillna(1.0) > 1e-4) & (cell.diff(-1).abs().fillna(1.0) > 1e-4)).to_numpy()
        assert (alone["prediction"].to_numpy()[clear] == together["prediction"].to_numpy()[clear]).all()


@pytest.mark.slow
@pytest.mark.parametrize("text", ["--help", "-- a dash", "--", "-x"])
def test_a_text_that_looks_like_an_option_is_traced_as_text(real, demo, text):
    rows, _ = real.submit(demo, text).result(timeout=300)
    first = rows[(rows["model"] == "tied") & (rows["lens"] == "logit")]
    assert _visible(data.trajectory_text(first)) == text


@pytest.mark.slow
def test_the_one_shot_command_takes_such_a_text_too(capsys):
    def traced_text(*args) -> str:
        assert main(["trajectory", str(DEMO), *args, "--max-tokens", "8", "--top-k", "1"]) == 0
        rows = pd.DataFrame(json.loads(capsys.readouterr().out)["rows"])
        return "".join(rows[(rows["model"] == "tied") & (rows["lens"] == "logit") & (rows["layer"] == 0)]
                       .sort_values("position")["token"])

    assert traced_text("--text=--help") == "--help"
    assert traced_text("--text", "-- a dash") == "-- a dash"
    assert traced_text("--text=--") == "--"  # argparse's separator, as a text


def test_only_models_slow_to_load_are_warmed_with_the_server(monkeypatch):
    assert live.slow_to_load({"tied": Path("/x/SmolLM2-135M-Instruct.Q4_1.gguf")})
    assert not live.slow_to_load({"tied": ROOT / "cache/toylab/demo/tied-seed0", "untied": ROOT / "u"})
    monkeypatch.setenv(live.WARM_ENV, "0")
    assert live.warm_at_start.__wrapped__("nowhere") is None  # switched off: no thread, no worker


@pytest.mark.slow
def test_the_server_warms_the_worker_of_a_gguf_model_before_any_text(tmp_path, monkeypatch):
    """app.py's first run starts, in the background, the worker of a cache whose model is a GGUF
    file here (SmolLM2's wheel, tens of seconds to load): a tiny one, loaded before any text."""
    pytest.importorskip("accelerate")
    from tests.apppage import open_page
    from tests.test_gguf import write_tiny_llama

    model = write_tiny_llama(tmp_path / "tiny.gguf", tied=True, seed=1)
    caches = tmp_path / "caches"
    assert main(["pair", "--tied", str(model), "--cache-dir", str(caches), "--name", "tiny",
                 "--skip", "alignment,neighbours,spectral,cka,umap,lens,self_prediction"]) == 0
    monkeypatch.setenv(live.WARM_ENV, "1")
    at = open_page(caches, monkeypatch, "overview", pair="tiny")
    assert not at.exception
    ref = data.CacheRef.of(caches / "tiny.duckdb")
    worker = live.tracers().worker(ref)
    try:
        wait_until(lambda: worker.pid, timeout=180, interval=0.05, what="the warmed worker, ready")
        assert worker.starts == 1 and worker.status == (4, 4, "ready")  # configuration, weights, tokenizer, lens
        rows, used = live.tracers().submit(ref, "the thin tea").result(timeout=120)
        assert worker.starts == 1 and Path(used["tied"]["model"]).name == "tiny.gguf" and not rows.empty
    finally:
        worker.close()


def _workers_of(pid: int) -> list[str]:
    """The command lines of process ``pid``'s children that are trajectory workers (from /proc)."""
    found = []
    for d in Path("/proc").iterdir():
        try:
            if d.name.isdigit() and int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]) == pid:
                line = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode()
                found += [line] if "serve-trajectory" in line else []
        except (OSError, IndexError, ValueError):
            continue
    return found


@pytest.mark.slow
def test_the_docker_entry_point_opens_its_port_with_the_gguf_worker_loaded(tmp_path):
    """python -m explorer.serve (the image's command) loads a GGUF model's worker before the server
    answers (its log says so before Streamlit's), so a first visitor finds it loaded; a page then
    uses that worker, not a second one (Streamlit's resource cache is the process's)."""
    import subprocess

    pytest.importorskip("accelerate")
    from tests import appbrowser as ab
    from tests.test_gguf import write_tiny_llama

    model = write_tiny_llama(tmp_path / "tiny.gguf", tied=True, seed=1)
    caches = tmp_path / "caches"
    assert main(["pair", "--tied", str(model), "--cache-dir", str(caches), "--name", "tiny",
                 "--skip", "alignment,neighbours,spectral,cka,umap,lens,self_prediction"]) == 0
    port = ab.free_port()
    env = dict(os.environ, TYING_CACHE_DIR=str(caches), STREAMLIT_BROWSER_GATHER_USAGE_STATS="false",
               **{live.WARM_ENV: "1"})
    proc = subprocess.Popen([sys.executable, "-m", "explorer.serve", "--server.headless", "true", "--server.port",
                             str(port), "--server.address", "127.0.0.1"], cwd=ab.ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    try:
        wait_until(lambda: proc.poll() is not None or ab.healthy(f"http://127.0.0.1:{port}"), timeout=180, interval=0.1, what="the server")
        assert proc.poll() is None and len(_workers_of(proc.pid)) == 1  # loaded before the port opened
        if ab.CHROMIUM and ab.DRIVER:  # a page's run finds that worker: still one
            browser = ab.chromium(1200, 900)
            try:
                browser.get(f"http://127.0.0.1:{port}/lens?pair=tiny")
                ab.settled(browser, timeout=60)  # the page has run (app.py among it)
            finally:
                browser.quit()
            assert len(_workers_of(proc.pid)) == 1
    finally:
        proc.terminate()
        out = proc.communicate(timeout=30)[0]
    assert "loading the models of tiny.duckdb before the server opens" in out.split("You can now view")[0], out[-2000:]


def _kill_with_texts_in_flight(worker, jobs, timeout: float = 60) -> None:
    """SIGKILL the worker's process while it holds texts it has not answered, once a first text is
    answered. Between two batches the process holds none (the next batch, sent after the kill, goes
    to a fresh process and is never in flight twice), and under load the test may look in that gap:
    so the process is frozen (SIGSTOP) and killed only if it still holds an unanswered text, else let
    go on (SIGCONT) and looked at again."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if any(j.done() for j in jobs):
            pid = worker.pid
            os.kill(pid, signal.SIGSTOP)
            time.sleep(0.05)  # answers it wrote before it stopped are read meanwhile
            with worker._cond:
                holding = any(not j.done() for j in worker._inflight)
            if holding:
                os.kill(pid, signal.SIGKILL)
                return
            os.kill(pid, signal.SIGCONT)
        time.sleep(0.005)
    raise AssertionError(f"the worker was never caught holding an unanswered text within {timeout:g} s")


@pytest.mark.slow
def test_a_killed_worker_is_restarted_and_the_queue_answered():
    tracers = live.Tracers()
    demo = data.CacheRef.of(DEMO)
    try:
        tracers.submit(demo, "warm up").result(timeout=300)
        worker = tracers.worker(demo)
        jobs = [tracers.submit(demo, f"visitor {i} types a sentence of their own") for i in range(40)]
        _kill_with_texts_in_flight(worker, jobs)  # mid-queue: some answered, some in flight, some waiting
        answered = errors = 0
        for j in jobs:
            try:
                rows, _ = j.result(timeout=300)
                assert not rows.empty
                answered += 1
            except UserError as exc:  # one line, no traceback
                assert "\n" not in str(exc) and "Traceback" not in str(exc)
                errors += 1
        assert answered + errors == len(jobs) and answered == len(jobs)  # those in flight sent again
        assert worker.starts == 2 and any(j.attempts == 1 for j in jobs)  # it died with texts in flight
        later, _ = tracers.submit(demo, "a later text").result(timeout=300)
        assert _visible(data.trajectory_text(later[(later["model"] == "tied") & (later["lens"] == "logit")])) \
            == "a later text"
    finally:
        tracers.close()
