"""A small seeded fuzz of the command line and of the app's URL parameters.

Every CLI call must end with exit 0 or 2; on 2, the last line of stderr is its only
``error:`` line, there is no traceback, and the cache folder gained no file. Every page of
the app must render without an exception whatever the URL says.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from streamlit.testing.v1 import AppTest

from explorer.render import pages
from precompute.cli import main
from precompute.fixtures import build_synthetic_cache
from tests.stage_lists import MATRICES_ONLY

ROOT = Path(__file__).resolve().parent.parent
APP = str(ROOT / "app.py")
SEED = 20261129

JUNK = ["-1", "0", "-0", "1" + "0" * 30, "abc", "", " ", "1.5", "1e3", "nan", "inf", "-inf", "ü🪢",
        "/does/not/exist", "--", "0x10", "None", "\\0", "../../etc", "a,b,,c",
        "1", "3", "0.5", "cpu"]  # a few valid values, so that some runs get past the parser
PAIR_OPTIONS = ["--neighbours-k", "--held-out", "--spectral-k", "--spectral-components", "--spectral-tokens",
                "--umap-tokens", "--umap-epochs", "--seed", "--text", "--device", "--name", "--tied-revision",
                "--untied-revision", "--preset", "--lens-steps", "--lens-text", "--lens-batch-size"]
VALID = {"--neighbours-k": "5", "--held-out": "0.3", "--spectral-k": "5", "--spectral-components": "4",
         "--spectral-tokens": "100", "--seed": "7", "--device": "cpu", "--name": "fz2", "--text": "",
         "--tied-revision": "", "--untied-revision": "", "--preset": "", "--lens-text": "python-docs"}
FAST = ["--skip", MATRICES_ONLY]


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, tiny_model):
    root = tmp_path_factory.mktemp("fuzz-models")
    tied, untied = tiny_model("llama", True, seed=1), tiny_model("llama", False, seed=2)

    def broken(name, change):
        d = root / name
        shutil.copytree(untied, d)
        change(d)
        return d

    out = {"tied": tied, "untied": untied, "missing": root / "no-such-model", "file": tied / "config.json"}
    out["empty_config"] = broken("empty-config", lambda d: (d / "config.json").write_text(""))
    out["unknown_type"] = broken("unknown-type", lambda d: (d / "config.json").write_text(
        (d / "config.json").read_text().replace('"llama"', '"no_such_family"')))
    out["truncated"] = broken("truncated", lambda d: (d / "model.safetensors").write_bytes(
        (d / "model.safetensors").read_bytes()[:1000]))
    out["garbage_weights"] = broken("garbage", lambda d: (d / "model.safetensors").write_bytes(b"\xff" * 64))
    out["no_weights"] = broken("no-weights", lambda d: (d / "model.safetensors").unlink())

    def drop_tokenizer(d):
        for f in d.iterdir():
            if "token" in f.name or f.name == "special_tokens_map.json":
                f.unlink()

    out["no_tokenizer"] = broken("no-tokenizer", drop_tokenizer)
    out["empty_dir"] = root / "empty"
    out["empty_dir"].mkdir()
    (root / "empty.txt").write_text("")
    out["empty_text"] = root / "empty.txt"
    (root / "bad.csv").write_text("step,foo\n1,2\nx,\n")
    out["bad_csv"] = root / "bad.csv"
    (root / "fake.duckdb").write_bytes(b"not a database")
    out["fake_cache"] = root / "fake.duckdb"
    return out


ERRORS: list[str] = []


def _files(folder: Path) -> set[str]:
    return {str(p.relative_to(folder)) for p in folder.rglob("*")} if folder.exists() else set()


def _check(argv, code, err, before, cache: Path):
    where = f"argv={argv!r} exit={code} stderr={err[-2000:]!r}"
    assert code in (0, 2), where
    assert "Traceback" not in err, where
    lines = [line for line in err.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error:")]
    if code == 2:
        assert len(errors) == 1 and lines[-1] == errors[0], where
        assert _files(cache) <= before, f"{where} new files: {_files(cache) - before}"
    else:
        assert not errors, where


def _run(capsys, argv, cache: Path):
    argv = [str(a) for a in argv]
    before = _files(cache)
    capsys.readouterr()
    try:
        code = main(argv)
    except SystemExit as exc:  # main must return, not exit
        code = f"SystemExit({exc.code})"
    except BaseException as exc:
        code = f"raised {exc!r}"
    err = capsys.readouterr().err
    _check(argv, code, err, before, cache)
    ERRORS.append(err.strip().splitlines()[-1][:100] if err.strip() else f"exit {code}")
    return code


def _fixed_cases(d, cache):
    pair = ["pair", "--cache-dir", cache, "--name", "fz"]
    good = ["--tied", d["tied"], "--untied", d["untied"]]
    cases = [[], ["pair"], ["nonsense"], ["pair", "--bogus-flag"], ["--help-me"], ["pair", "--tied"],
             pair, pair + ["--tied", d["tied"]] + FAST, pair + ["--preset", "nope"],
             pair + good + ["--skip", "alignment,bogus"], pair + good + ["--skip", "ü🪢"],
             pair + good + FAST + ["--neighbours-k", "100000"],
             pair + ["--tied", d["untied"], "--untied", d["untied"]] + FAST,
             pair + ["--tied", d["tied"], "--untied", d["tied"]] + FAST,
             ["summary"], ["summary", d["missing"]], ["summary", d["fake_cache"]], ["summary", d["empty_dir"]],
             ["summary", "", "--cache-dir", cache], ["summary", "ü🪢", "--cache-dir", d["missing"]],
             ["grads", "--csv", d["missing"], "--name", "g", "--cache-dir", cache],
             ["grads", "--csv", d["bad_csv"], "--name", "g", "--cache-dir", cache],
             ["grads", "--csv", d["empty_text"], "--name", "g", "--cache-dir", cache],
             ["grads", "--csv", d["empty_dir"], "--name", "g", "--cache-dir", cache],
             ["evolution", "--model", d["missing"], "--revisions", "a,b", "--cache-dir", cache],
             ["evolution", "--model", d["empty_dir"], "--revisions", ",", "--cache-dir", cache],
             ["evolution", "--model", d["tied"], "--revisions", "", "--cache-dir", cache],
             ["demo", "--cache-dir", cache, "--vocab-size", "-5"],
             ["demo", "--cache-dir", cache, "--input-grad-scale", "a,b", "--steps", "0"],
             ["demo", "--cache-dir", cache, "--input-grad-scale", "-1"],
             ["demo", "--cache-dir", cache, "--input-grad-scale", "nan"],
             ["demo", "--cache-dir", cache, "--input-grad-scale", ""],
             ["demo", "--cache-dir", cache, "--corpus", d["missing"]],
             ["demo", "--cache-dir", cache, "--corpus", d["empty_text"]],
             ["lens", "--cache-dir", cache, "--name", "fz"] + good + ["--lens-text", d["missing"]],
             ["lens", "--cache-dir", cache, "--name", "fz"] + good + ["--lens-text", d["empty_text"]]]
    for bad in ("missing", "file", "empty_config", "unknown_type", "truncated", "garbage_weights",
                "no_weights", "no_tokenizer", "empty_dir"):
        cases.append(pair + ["--tied", d["tied"], "--untied", d[bad]] + FAST)
        cases.append(pair + ["--tied", d[bad], "--untied", d["untied"]] + FAST)
    return cases


def _random_cases(d, cache, n):
    rng = random.Random(SEED)
    models = ["tied", "untied", "missing", "empty_config", "unknown_type", "truncated", "no_tokenizer"]
    cases = []
    for _ in range(n):
        argv = ["pair", "--cache-dir", cache, "--spectral-components", "8", "--neighbours-k", "10"]
        if rng.random() < 0.9:
            argv += ["--tied", d[rng.choice(models[:1] * 4 + models)]]
        if rng.random() < 0.9:
            argv += ["--untied", d[rng.choice(models[1:2] * 4 + models)]]
        for option in rng.sample(PAIR_OPTIONS, rng.randint(1, 2)):
            argv += [option, VALID.get(option, "1") if rng.random() < 0.4 else rng.choice(JUNK)]
        if rng.random() < 0.15:
            argv.append(rng.choice(["--unknown", "-x", "--forc", "ü", "--skip=", "--force=1"]))
        argv += FAST  # last, so no fuzzed case trains a lens or runs UMAP
        cases.append(argv)
    return cases


@pytest.mark.slow
def test_cli_fuzz_in_process(dirs, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a default --cache-dir 'cache' lands here, not in the repo
    cache = tmp_path / "cache"
    cache.mkdir()
    codes = []
    for argv in _fixed_cases(dirs, cache) + _random_cases(dirs, cache, 30):
        codes.append(_run(capsys, argv, cache))
    print("\n".join(ERRORS))
    print("exit codes:", {c: codes.count(c) for c in set(codes)})
    assert codes.count(0) >= 1 and codes.count(2) > len(codes) // 2  # mostly errors, some runs succeed


@pytest.mark.slow
@pytest.mark.parametrize("argv", [
    ["pair", "--neighbours-k", "ü🪢", "--tied", "x", "--untied", "y"],
    ["summary", "/does/not/exist.duckdb", "--json"],
    ["frobnicate", "--cache-dir", ""],
])
def test_cli_fuzz_subprocess(tmp_path, argv):
    cache = tmp_path / "cache"
    cache.mkdir()
    out = subprocess.run([sys.executable, "-m", "precompute", *argv, "--cache-dir", str(cache)]
                         if argv[0] != "frobnicate" else [sys.executable, "-m", "precompute", *argv],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(ROOT)})
    _check(argv, out.returncode, out.stderr, set(), cache)
    assert out.returncode == 2


URL_JUNK = {
    "pair": ["", "nope", "ü🪢", "../synthetic", "synthetic\x00", "<script>"],
    "token": ["-1", "999999999999", "abc", "", "1.5", "299", "nan"],
    "k": ["0", "-3", "100000", "x", "", "1e2"],
    "method": ["", "linear;drop", "ORTHOGONAL", "ü"],
    "split": ["", "held-out", "None"],
    "layer": ["-1", "99999", "two", ""],
    "view": ["", "sideways", "overlaid "],
}
PAGES = ["overview"] + [p.path for p in pages.PAGES if p.needs]  # the pages of one cache, from the registry


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory):
    d = tmp_path_factory.mktemp("fuzz-caches")
    build_synthetic_cache(d, "synthetic", n_tokens=300)
    return d


@pytest.mark.parametrize("page", PAGES)
def test_url_fuzz_every_page(synthetic, monkeypatch, page):
    monkeypatch.setenv("TYING_CACHE_DIR", str(synthetic))
    rng = random.Random(f"{SEED}-{page}")
    for trial in range(2):
        params = {name: rng.choice(values) for name, values in URL_JUNK.items()}
        if trial == 1:
            params["pair"] = "synthetic"  # junk everywhere else, on a real cache
        at = AppTest.from_file(APP, default_timeout=60)
        for key, value in params.items():
            at.query_params[key] = value
        at.run()
        assert not at.exception, (page, params, [e.value for e in at.exception])
        if page != "overview":
            at.switch_page(f"views/{page}.py").run()
            assert not at.exception, (page, params, [e.value for e in at.exception])
