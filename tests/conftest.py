"""Shared fixtures: tiny random models and tokenizers, built once per test session; the
synthetic, sweep, mechanism and paper caches and the static site of them that the site, handout, QR and
browser tests read, built once per run and shared by the xdist workers (:func:`shared_folder`)."""

from __future__ import annotations

import atexit
import contextlib
import hashlib
import io
import os
import shutil
import sys
from pathlib import Path

# the app's runs here start no model worker with the server (explorer.live.warm_at_start): where SmolLM2's
# wheel is installed, each test process would load it for nothing (tests/test_live.py turns it on)
os.environ.setdefault("TYING_WARM_AT_START", "0")
if os.environ.get("PYTEST_XDIST_WORKER"):  # one thread per worker: the workers share the machine's cores
    for _var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
        os.environ.setdefault(_var, "1")

import pytest

from tying import layout

pytest_plugins = ("tests.appbrowser",)  # the app's `server` and `browser` fixtures (one of each per module)


@pytest.fixture(scope="session", autouse=True)
def _apptest_runs_as_the_server_does():
    """AppTest without the costs the app's server does not have: the components scanned once, each
    script compiled once, a run's end awaited without polling (tests/apptest_runs.py)."""
    from tests import apptest_runs

    with contextlib.suppress(ImportError):  # no Streamlit: no AppTest either
        apptest_runs.install()


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory):
    """A 300-token byte-level BPE shared by the tiny models (so their vocabularies match)."""
    from tests.tiny_models import make_tokenizer  # (torch: imported where a test needs it, not by every process)

    path = tmp_path_factory.mktemp("tokenizer")
    make_tokenizer(path, 300, corpus_seed=0)
    return path


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory, tokenizer_dir):
    """``tiny_model(family, tied, **options)`` -> folder of a saved tiny model, built once per options.

    The returned folder is shared between tests: copy it before changing files in it.
    """
    from tests.tiny_models import make_tiny_model

    built = {}

    def get(family: str, tied: bool, **options):
        key = (family, tied, tuple(sorted((k, repr(v)) for k, v in options.items())))
        if key not in built:
            options.setdefault("tokenizer_dir", tokenizer_dir)
            out = tmp_path_factory.mktemp(f"{family}-{'tied' if tied else 'untied'}")
            built[key] = make_tiny_model(family, out, tied=tied, **options)
        return built[key]

    return get


@pytest.fixture(scope="session")
def mirror_pair(tmp_path_factory, tokenizer_dir, tiny_model):
    """(tied, mirror): a tiny tied Llama, and an untied one whose output matrix is the tied model's
    matrix and whose input matrix is random (O->T aligns at 1, CKA T~O is 1)."""
    from tests.tiny_models import make_tiny_model

    tied = tiny_model("llama", True, seed=1)

    def copy_tied_into_output(model):
        from safetensors.torch import load_file

        w = load_file(str(tied / "model.safetensors"))
        model.lm_head.weight.copy_(w[next(k for k in w if k.endswith("embed_tokens.weight"))])

    mirror = make_tiny_model("llama", tmp_path_factory.mktemp("mirror"), tied=False, tokenizer_dir=tokenizer_dir,
                             seed=3, edit=copy_tied_into_output)
    return tied, mirror


SWEEP_GAPS = {32: [0.30, 0.31, 0.29], 64: [0.10, 0.11, 0.09], 128: [-0.10, -0.11, -0.09]}
"""The sweep cache's loss gaps (untied minus tied) per width and seed: shrinking with width,
negative at the widest."""


ROOT = Path(__file__).resolve().parent.parent


def site_command(*argv) -> tuple[int, str, str]:
    """``python -m precompute site ARGV`` in this process: (exit code, stdout, stderr)."""
    from precompute.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(["site", *(str(a) for a in argv)])
    return code, out.getvalue(), err.getvalue()


def shared_folder(tmp_path_factory, name: str, build) -> Path:
    """A folder that ``build(folder)`` fills once for the whole test run, on every xdist worker
    alike: the first worker to ask builds it under a file lock beside the workers' own temporary
    folders, the others wait and read it. Read-only for the tests: :func:`fingerprint` it."""
    from filelock import FileLock

    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # shared by the workers of this run
    folder, done = root / f"shared-{name}", root / f"shared-{name}.done"
    with FileLock(str(root / f"shared-{name}.lock")):
        if not done.is_file():
            if folder.exists():
                shutil.rmtree(folder)  # a build that failed half-way
            folder.mkdir()
            build(folder)
            done.write_text("ok")
    return folder


def fingerprint(folder: Path) -> dict[str, str]:
    """{relative path: sha256} of every file under ``folder``."""
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _build_synthetic_caches(caches: Path) -> None:
    from precompute.fixtures import build_mechanism_cache, build_sweep_cache, build_synthetic_cache
    from precompute.published import PaperConfig, build_paper

    build_synthetic_cache(caches, "synthetic", model_dir=caches / "toylab" / "synthetic")  # absolute: kept off the site
    build_sweep_cache(caches, SWEEP_GAPS)
    build_mechanism_cache(caches)
    build_paper(PaperConfig(cache_dir=str(caches)))


@pytest.fixture(scope="session")
def synthetic_caches(tmp_path_factory):
    """A folder of four caches: ``synthetic`` (a pair whose vocabulary holds a script tag), a
    ``sweep`` of ``SWEEP_GAPS``, a ``mechanism`` lab and the ``paper``'s published numbers. Built
    once for the whole run and shared by every module and worker (sites are written elsewhere, a
    server only reads it); a test that changed a file of it fails the run's last check here."""
    caches = shared_folder(tmp_path_factory, "synthetic-caches", _build_synthetic_caches)
    before = fingerprint(caches)
    yield caches
    assert fingerprint(caches) == before, "a test changed the shared synthetic caches: copy them first"


SITE_NAMES = ("synthetic", "paper", "sweep", "mechanism")
"""The caches of the shared site, in its order."""

SITE_BASE_URL = "https://example.org/weight-tying"
"""The public address the shared site is built for (its first and last tour steps draw it as a QR code)."""


SHIPPED_NAMES = ("demo", "paper", "sweep", "mechanism")
"""The shipped caches ``shipped`` copies and ``shipped_site`` draws, in the site's order (the demo first)."""


@pytest.fixture(scope="session")
def shipped(tmp_path_factory):
    """Copies of the shipped demo, paper, sweep and mechanism caches and the demo's lens translators
    (nothing touches cache/), made once for the run (shared_folder) and read only."""
    if not (ROOT / "cache" / "demo.duckdb").exists():
        pytest.skip("the shipped demo cache is absent")

    def copy(caches: Path) -> None:
        for name in SHIPPED_NAMES:
            shutil.copy(ROOT / "cache" / f"{name}.duckdb", caches / f"{name}.duckdb")
        shutil.copytree(layout.lens_dir(ROOT / "cache", "demo"), layout.lens_dir(caches, "demo"))

    caches = shared_folder(tmp_path_factory, "shipped-caches", copy)
    before = fingerprint(caches)
    yield caches
    assert fingerprint(caches) == before, "a test changed the shipped caches' copies"


@pytest.fixture(scope="session")
def shipped_site(shipped, tmp_path_factory):
    """The static site of the shipped caches (:func:`shipped`'s copies), the demo with its lens
    translators (so with its text page), in the default formats: one build for the whole run
    (shared_folder), read by the site, text-page and Chromium tests. What ``precompute site demo``
    alone would write is this site less the other caches' folders (:func:`demo_share`)."""
    def build(folder: Path) -> None:
        code, _, err = site_command(*SHIPPED_NAMES, "--cache-dir", shipped, "--out", folder / "site")
        assert code == 0, err[-2000:]

    folder = shared_folder(tmp_path_factory, "shipped-site", build)
    before = fingerprint(folder / "site")
    yield folder / "site"
    assert fingerprint(folder / "site") == before, "a test changed the shared shipped site: copy it first"


def demo_share(site_root: Path) -> list[Path]:
    """The files of :func:`shipped_site` that are the demo's site: all but the other caches' folders
    (the index and the tour, drawn with every cache, are a few kB larger than the demo's alone)."""
    others = {f"{name}/" for name in SHIPPED_NAMES[1:]}
    return [p for p in site_root.rglob("*")
            if p.is_file() and not any(p.relative_to(site_root).as_posix().startswith(o) for o in others)]


@pytest.fixture(scope="session")
def synthetic_site(synthetic_caches, tmp_path_factory):
    """``(site folder, stdout, stderr)``: one static site of the synthetic folder's four caches, with SVG
    downloads, the handout and QR codes for :data:`SITE_BASE_URL`, built once for the whole run and
    read by the site, handout and QR tests (the command's own checks run there)."""
    def build(folder: Path) -> None:
        code, out, err = site_command(*SITE_NAMES, "--cache-dir", synthetic_caches, "--out", folder / "site",
                                      "--formats", "svg", "--handout", "--base-url", SITE_BASE_URL + "/")
        assert code == 0, err[-2000:]
        (folder / "stdout.txt").write_text(out)
        (folder / "stderr.txt").write_text(err)

    folder = shared_folder(tmp_path_factory, "synthetic-site", build)
    before = fingerprint(folder)
    yield folder / "site", (folder / "stdout.txt").read_text(), (folder / "stderr.txt").read_text()
    assert fingerprint(folder) == before, "a test changed the shared site: copy it first"


SHARED_WORKER = {"umap": ("test_projection", "test_placement", "test_single_model"),
                 "site": ("test_text_page", "test_site_chromium", "test_site", "test_handout", "test_qr")}
"""Modules that run on one worker together, in the order given. ``umap``: each fits UMAP, and a
process loads umap's numba kernels once (from numba's disk cache, which :func:`start_umap_warmup` fills
at the run's start on a fresh install; compiling them is about 40 s of a core), so together they load
them once. ``site``: the readers of the two shared sites (synthetic_site, shipped_site), so that
one worker builds each in turn while the other runs other tests, instead of one worker idling on the
other's lock; the shipped site's readers first, so that at the run's start this worker builds it while
test_browser's builds the synthetic caches (the synthetic site's readers first left one core idle about
8 s, waiting on the other worker's build of those caches)."""

HEAVY_FIRST = ("test_browser", "site", "test_browser_tour", "test_sweep", "test_projection_webgl",
               "test_figures_pack", "test_live", "umap", "test_app", "test_demo_cli", "test_faults")
"""The worker groups that take longest (``python bench/bench_suite.py`` prints them), handed out
first, so that the workers finish together rather than one waiting on a late long module. (The
browser's groups keep a core busy too: most of their time is Chromium's renderer drawing pages.) The
UMAP group comes after the browser's first groups, whose idle moments the warm-up compiles in."""


def module_of(nodeid: str) -> str:
    """The module name of a test id (``tests/test_site.py::test_x`` -> ``test_site``)."""
    return nodeid.split("::", 1)[0].rsplit("/", 1)[-1].removesuffix(".py")


def worker_group(nodeid: str) -> str:
    """The group a test runs in under xdist: its module (whose module-scoped fixtures, a server or a
    browser among them, are then built once) or the group of SHARED_WORKER that takes the module."""
    module = module_of(nodeid)
    return next((group for group, modules in SHARED_WORKER.items() if module in modules), module)


def pytest_configure(config):
    """An xdist worker leaves without the interpreter's teardown once its tests are done and reported:
    freeing torch's, transformers' and the tests' objects one by one and unloading their libraries took
    each worker 2.5-3.5 s after its last test (the controller waiting on it; torch alone 0.5 s in a bare
    interpreter). Registered first of the worker's exit handlers (at configure, before the test modules
    import anything), so it runs after all the others (pytest's, logging's, multiprocessing's, the
    tests'); the controller's exit, whose status is the run's, is Python's own."""
    if hasattr(config, "workerinput"):
        atexit.register(_worker_leaves)


def _worker_leaves() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def pytest_collection_modifyitems(config, items):
    """The heaviest groups first, a group's modules in SHARED_WORKER's order (a stable sort: a module's
    tests keep their order, and a group's modules stay together)."""
    def rank(item) -> tuple[int, int]:
        group = worker_group(item.nodeid)
        module = module_of(item.nodeid)
        members = SHARED_WORKER.get(group, ())
        return (HEAVY_FIRST.index(group) if group in HEAVY_FIRST else len(HEAVY_FIRST),
                members.index(module) if module in members else 0)

    items.sort(key=rank)


_WARMUP: list = []


def pytest_collection_finish(session):
    """On the first xdist worker, where the run holds the UMAP group's fits (its slow tests; the quick loop
    has none): :func:`start_umap_warmup`."""
    if os.environ.get("PYTEST_XDIST_WORKER") == "gw0" and any(
            worker_group(item.nodeid) == "umap" and item.get_closest_marker("slow") for item in session.items):
        start_umap_warmup()


def start_umap_warmup() -> None:
    """tests/umap_warmup.py in the background, at the lowest CPU priority: it compiles umap-learn's numba
    kernels into numba's disk cache on a core the browser tests leave idle, before the UMAP group's worker
    needs them (on a fresh install, about 40 s of a core that worker no longer spends)."""
    import subprocess

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))))
    with contextlib.suppress(OSError):
        _WARMUP.append(subprocess.Popen([sys.executable, "-m", "tests.umap_warmup"], cwd=ROOT, env=env,
                                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))


def pytest_sessionfinish(session):
    """The warm-up, where it still runs, stopped with the worker's tests."""
    for process in _WARMUP:
        if process.poll() is None:
            process.kill()
        process.wait()


def pytest_xdist_make_scheduler(config, log):
    """xdist hands out whole groups (:func:`worker_group`), in the collection's order: xdist's own
    ``loadgroup`` no longer reads its marks under pytest 9, whose test ids it can no longer rename."""
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return GroupScheduling(config, log)
