"""Three costs of Streamlit's AppTest that the app's server does not have, taken out of the tests.

- **The components scanned once.** AppTest scans every installed distribution's metadata for
  custom components (``manifest_scanner.scan_component_manifests``) on every run: 0.3 s of each
  AppTest page, most of its time then. The packages do not change while the tests run, so the
  first scan's answer serves the rest; the server scans once, at start.
- **The scripts compiled once.** AppTest makes a new ScriptCache for every run, so every ``at.run()``
  read, rewrote (Streamlit's magic: a walk over the whole syntax tree) and compiled app.py and the
  page again; the server keeps one cache for its life (streamlit/streamlit#6673) and compiles each
  page once. Here one compiled code object serves every run of the test process per (file, its
  bytes, magic on or off): a script that changes between runs is compiled again. That was 14% of
  tests/test_app.py's samples (py-spy).
- **The wait for a run without polling.** AppTest waits for a run by polling every millisecond
  whether the runner has stopped, and each poll scans every event of the run so far (hundreds of
  deltas on a page) while holding the GIL the script's thread needs: 11% of the samples. The run's
  script thread ends when the run does, so the wait joins that thread instead, with the same
  timeout, the same stop and the same error when it passes.

:func:`install` patches all three into Streamlit's testing package for this process (tests/conftest.py
calls it once per test process); where Streamlit's internals are not as this module expects, it
leaves them alone and says so (False).
"""

from __future__ import annotations

import os
import threading

_compiled: dict[tuple[str, bytes, bool], object] = {}
_lock = threading.Lock()
_installed = False
_scan_shared = False


def install() -> bool:
    """Patch AppTest's component scan, script cache and wait (idempotent); False where Streamlit's
    runner differs (the scan is shared wherever Streamlit has it)."""
    global _installed
    if _installed:
        return True
    from streamlit import config
    from streamlit.runtime.scriptrunner import script_cache
    from streamlit.testing.v1 import local_script_runner

    _scan_components_once()
    original_get = script_cache.ScriptCache.get_bytecode
    original_wait = local_script_runner.require_widgets_deltas
    if getattr(local_script_runner.LocalScriptRunner, "script_stopped", None) is None:
        return False

    def get_bytecode(self, script_path: str):
        path = os.path.abspath(script_path)
        with open(path, "rb") as fh:
            key = (path, fh.read(), bool(config.get_option("runner.magicEnabled")))
        with _lock:
            code = _compiled.get(key)
        if code is None:
            code = original_get(self, script_path)
            with _lock:
                _compiled[key] = code
        return code

    def require_widgets_deltas(runner, timeout: float = 3) -> None:
        thread = getattr(runner, "_script_thread", None)
        if not isinstance(thread, threading.Thread):
            return original_wait(runner, timeout)
        thread.join(timeout)
        if thread.is_alive() and not runner.script_stopped():
            runner.request_stop()  # as Streamlit does: stop the script, then say so
            runner.join()
            raise RuntimeError(f"AppTest script run timed out after {timeout}(s)")
        return None

    script_cache.ScriptCache.get_bytecode = get_bytecode
    local_script_runner.require_widgets_deltas = require_widgets_deltas
    _installed = True
    return True


def _scan_components_once() -> None:
    global _scan_shared
    if _scan_shared:
        return
    _scan_shared = True
    try:
        from streamlit.components.v2 import manifest_scanner
    except ImportError:  # a Streamlit without them: nothing to share
        return
    scan = getattr(manifest_scanner, "scan_component_manifests", None)
    if scan is None:
        return
    found = {}

    def scanned_once(max_workers=None):
        if "manifests" not in found:
            found["manifests"] = scan(max_workers)
        return list(found["manifests"])

    manifest_scanner.scan_component_manifests = scanned_once


def compiled_count() -> int:
    """How many (file, bytes, magic) code objects this process holds (for the tests of this module)."""
    with _lock:
        return len(_compiled)
