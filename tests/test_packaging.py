"""The Docker image (Hugging Face Space) installs what CI installs and serves the port the README declares."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = (ROOT / "Dockerfile").read_text()
README = (ROOT / "README.md").read_text()
CI = (ROOT / ".ci" / "run").read_text()


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) per Dockerfile instruction, continuation lines joined."""
    joined = re.sub(r"\\\n", " ", text)
    out = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            out.append((word.upper(), rest.strip()))
    return out


def _pip_requirement_files(command: str) -> list[str]:
    """The files given with -r / --requirement to every ``pip install`` in a shell command line."""
    files = []
    for part in re.split(r"&&|;|\|\|", command):
        if not re.search(r"\bpip\b.*\binstall\b", part):
            continue
        try:
            words = shlex.split(part)
        except ValueError:  # a quote split by the separators above: plain words will do
            words = part.split()
        if "pip" in words and "install" in words:
            for i, w in enumerate(words):
                if w in ("-r", "--requirement") and i + 1 < len(words):
                    files.append(words[i + 1])
                elif w.startswith("--requirement="):
                    files.append(w.split("=", 1)[1])
    return files


def _included(req_file: str, seen=None) -> set[str]:
    """A requirements file and every file it pulls in with -r, relative to the repository root."""
    seen = set() if seen is None else seen
    if req_file in seen:
        return seen
    seen.add(req_file)
    for line in (ROOT / req_file).read_text().splitlines():
        m = re.match(r"^\s*(?:-r|--requirement)\s*=?\s*(\S+)", line)
        if m:
            _included(str(Path(req_file).parent / m.group(1)).removeprefix("./"), seen)
    return seen


def _front_matter() -> dict[str, str]:
    assert README.startswith("---\n"), "README.md must open with the Space's YAML front matter"
    block = README[4:README.index("\n---\n", 4)]
    return {k.strip(): v.strip() for k, _, v in (ln.partition(":") for ln in block.splitlines() if ":" in ln)}


def _docker_pip_line() -> str:
    runs = [args for ins, args in _instructions(DOCKERFILE) if ins == "RUN" and _pip_requirement_files(args)]
    assert len(runs) == 1, f"expected one RUN pip install -r ... in the Dockerfile, found {runs}"
    return runs[0]


def test_dockerfile_installs_the_requirements_ci_installs():
    ci_files = [f for ln in CI.splitlines() if not ln.lstrip().startswith("#") for f in _pip_requirement_files(ln)]
    assert ci_files == ["requirements-dev.lock", "requirements-nodeps.txt"], ci_files
    docker_files = _pip_requirement_files(_docker_pip_line())
    assert docker_files == ["requirements.lock"], docker_files
    copied = [args for ins, args in _instructions(DOCKERFILE) if ins == "COPY"]
    assert any("requirements.lock" in c.split() or c.split()[-2:] == [".", "."] for c in copied)
    assert "--extra-index-url https://download.pytorch.org/whl/cpu" in _docker_pip_line()
    assert "torch==2.13.0" in (ROOT / "requirements.txt").read_text()


def _pins(lock: str) -> dict[str, str]:
    """name -> exact version of every line of a lock file (names normalised as PEP 503 does)."""
    pins = {}
    for line in (ROOT / lock).read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            m = re.fullmatch(r"([A-Za-z0-9._-]+)==(\S+)", line.strip())
            assert m, f"{lock}: not an exact pin: {line!r}"
            pins[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(2)
    return pins


def _ranges(req_file: str) -> list:
    from packaging.requirements import Requirement

    out = []
    for f in sorted(_included(req_file)):
        for line in (ROOT / f).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line and not line.startswith("-"):
                out.append(Requirement(line))
    return out


@pytest.mark.parametrize("req_file,lock", [("requirements.txt", "requirements.lock"),
                                           ("requirements-dev.txt", "requirements-dev.lock")])
def test_each_lock_pins_every_requirement_inside_its_range(req_file, lock):
    """Every package of requirements*.txt is pinned exactly, within its range: the lock is current."""
    pins = _pins(lock)
    for req in _ranges(req_file):
        name = re.sub(r"[-_.]+", "-", req.name).lower()
        assert name in pins, f"{lock} lacks {req.name}: run bash .ci/lock"
        assert req.specifier.contains(pins[name], prereleases=True), f"{lock}: {name}=={pins[name]} not in {req}"
    assert pins["torch"] == "2.13.0"  # no +cpu: the plain version matches the CPU wheel and the Docker index


def test_the_dev_lock_holds_the_runtime_pins():
    """CI tests the versions the app and the image install: the dev lock agrees on every runtime pin."""
    runtime, dev = _pins("requirements.lock"), _pins("requirements-dev.lock")
    assert {k: dev.get(k) for k in runtime} == runtime


def test_this_environment_runs_the_pinned_versions():
    """The tests run on the lock's versions (a venv built from requirements.txt instead would drift)."""
    from importlib.metadata import PackageNotFoundError, version

    if not (Path(sys.prefix) / "pyvenv.cfg").exists():
        pytest.skip("not in a virtual environment")
    drift = {}
    for name in ("pandas", "streamlit", "numpy", "duckdb", "altair", "transformers", "torch"):
        try:
            have = version(name).split("+")[0]
        except PackageNotFoundError:
            continue
        if have != _pins("requirements-dev.lock")[name]:
            drift[name] = have
    assert not drift, f"installed versions differ from requirements-dev.lock: {drift}"


def test_dockerfile_user_port_and_command_match_the_space():
    ins = _instructions(DOCKERFILE)
    assert ins[0] == ("FROM", "python:3.11-slim")
    assert any(i == "RUN" and re.search(r"useradd\b.*-u\s*1000\b", a) for i, a in ins), "no UID 1000 user"
    users = [a for i, a in ins if i == "USER"]
    assert users and users[-1] in ("user", "1000"), users
    assert ("WORKDIR", "/home/user/app") in ins
    meta = _front_matter()
    assert meta.get("sdk") == "docker"
    port = meta.get("app_port")
    assert port == "8501"
    assert ("EXPOSE", port) in ins
    cmd = [a for i, a in ins if i == "CMD"]
    assert len(cmd) == 1
    words = re.findall(r'"([^"]*)"', cmd[0]) or shlex.split(cmd[0])
    # streamlit run app.py, through the entry point that loads the slow models first (explorer/serve.py)
    assert words[:3] == ["python", "-m", "explorer.serve"], words
    flags = dict(zip(words[3::2], words[4::2]))
    assert flags.get("--server.port") == port
    assert flags.get("--server.address") == "0.0.0.0"
    assert flags.get("--server.headless") == "true"
    for key in ("title", "emoji", "colorFrom", "colorTo", "pinned", "short_description"):
        assert meta.get(key), f"front matter lacks {key}"
    assert len(meta["short_description"]) <= 60  # the Hub's limit


def test_dockerignore_keeps_the_demo_cache_in_the_image():
    ignored = {ln.strip().rstrip("/") for ln in (ROOT / ".dockerignore").read_text().splitlines()
               if ln.strip() and not ln.startswith("#")}
    assert {".venv", "bench/out", "cache/toylab/*", "cache/toylab/demo/*", "cache/lens/*", ".git"} <= ignored
    assert not ignored & {"cache", "cache/*", "cache/demo.duckdb", "*.duckdb"}
    assert (ROOT / "cache" / "demo.duckdb").exists()
    # of the toy lab's training folders only the seed-0 twins (and their lenses) go in: the Lens page runs them
    assert {"!cache/toylab/demo", "!cache/toylab/demo/tied-seed0", "!cache/toylab/demo/untied-seed0",
            "!cache/lens/demo"} <= ignored
    for folder in ("toylab/demo/tied-seed0", "toylab/demo/untied-seed0", "lens/demo"):
        assert any((ROOT / "cache" / folder).glob("*.safetensors")), folder


_NO_NETWORK = re.compile(r"(?i)(connection|network is unreachable|name resolution|max retries|timed out|"
                         r"could not find a version|no matching distribution)")


@pytest.mark.slow
def test_the_dockerfile_install_command_resolves_here():
    """pip install --dry-run of the Dockerfile's requirements file and index, in this interpreter."""
    line = _docker_pip_line()
    m = re.search(r"--extra-index-url\s+(\S+)", line)
    cmd = [sys.executable, "-m", "pip", "install", "--dry-run", "--disable-pip-version-check", "-q",
           "-r", str(ROOT / _pip_requirement_files(line)[0])] + (["--extra-index-url", m.group(1)] if m else [])
    try:
        run = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    except subprocess.TimeoutExpired:
        pytest.skip("pip install --dry-run took over 300 s (no network?)")
    if run.returncode and _NO_NETWORK.search(run.stderr + run.stdout):
        pytest.skip("pip cannot reach a package index here: " + (run.stderr.strip().splitlines() or [""])[-1][:200])
    assert run.returncode == 0, run.stderr[-2000:]


def test_pyproject_matches_requirements_and_names_a_working_console_script():
    """pyproject.toml's dependencies are requirements.txt's, and its console script is the CLI."""
    import importlib
    import tomllib

    root = Path(__file__).resolve().parent.parent
    meta = tomllib.loads((root / "pyproject.toml").read_text())
    reqs = [ln.split("#")[0].strip() for ln in (root / "requirements.txt").read_text().splitlines()]
    assert sorted(meta["project"]["dependencies"]) == sorted(r for r in reqs if r)
    module, func = meta["project"]["scripts"]["precompute"].split(":")
    assert callable(getattr(importlib.import_module(module), func))
    assert meta["tool"]["ruff"]["line-length"] == 120


def test_the_no_deps_requirements_are_exact_pins_installed_here():
    """requirements-nodeps.txt (installed with --no-deps: tuned-lens, to test the lenses it loads)
    pins exact versions, and the test environment runs them."""
    from importlib.metadata import version

    lines = [ln.strip() for ln in (ROOT / "requirements-nodeps.txt").read_text().splitlines()
             if ln.strip() and not ln.lstrip().startswith("#")]
    assert lines
    for line in lines:
        name, sep, pinned = line.partition("==")
        assert sep and pinned and not any(c in pinned for c in "<>=!~*"), line
        assert version(name) == pinned, f"{name} {version(name)} installed, {pinned} pinned"
