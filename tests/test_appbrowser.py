"""tests/appbrowser.py: the browser the tests drive is the one that ends when its driver quits."""

from __future__ import annotations

import stat
import time

import pytest

from tests import appbrowser as ab


def _script(path, text):
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_launcher_that_runs_the_browser_as_its_child_is_looked_through(tmp_path):
    """Debian's wrapper (`/usr/lib/.../binary "$@"`, no exec) gives its binary; a launcher that execs,
    a binary, a script naming no executable, and nothing at all give what they were given."""
    binary = _script(tmp_path / "browser-binary", "#!/bin/sh\necho fake browser\n")
    child = _script(tmp_path / "child", f'#!/bin/sh -e\n\n{binary} "$@"\n')
    assert ab._browser_binary(child) == binary
    execs = _script(tmp_path / "execs", f'#!/bin/sh\nexec {binary} "$@"\n')
    assert ab._browser_binary(execs) == execs
    missing = _script(tmp_path / "missing", f'#!/bin/sh\n{tmp_path}/not-here "$@"\n')
    assert ab._browser_binary(missing) == missing
    elf = tmp_path / "elf"
    elf.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)))
    assert ab._browser_binary(str(elf)) == str(elf)
    assert ab._browser_binary(None) is None


@pytest.mark.slow
@pytest.mark.skipif(not (ab.CHROMIUM and ab.DRIVER), reason="Debian's chromium and chromium-driver are needed")
def test_no_browser_process_outlives_its_driver():
    """Every process the driver started (the browser, its zygotes, renderer and GPU process) has ended
    a few seconds after ``quit()``: with the launcher script driven, the browser lived on."""
    import psutil

    driver = ab.chromium(400, 300)
    driver.get("data:text/html,<p>here</p>")
    started = psutil.Process(driver.service.process.pid).children(recursive=True)
    assert any("--type=renderer" in " ".join(p.cmdline()) for p in started)  # the browser's whole tree
    driver.quit()
    deadline = time.monotonic() + 10
    while (alive := [p for p in started if p.is_running() and p.status() != psutil.STATUS_ZOMBIE]) \
            and time.monotonic() < deadline:
        time.sleep(0.2)
    assert alive == [], [" ".join(p.cmdline())[:120] for p in alive]
