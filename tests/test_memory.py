"""tying.memory: the one reader of this process's peak and current resident memory."""

from __future__ import annotations

import ast
import gc
import sys
from pathlib import Path

import numpy as np
import pytest

from tying import memory
from tying.memory import peak_memory, resident_memory

ROOT = Path(__file__).resolve().parent.parent
MIB = 2**20
SLACK = 8 * MIB  # the kernel updates its counts in batches: two reads may differ by a few hundred kB


def _file_backed() -> int:
    """This process's resident pages that are not its own memory (mapped files, shared memory)."""
    anonymous = memory._status("RssAnon")
    if anonymous is None:
        pytest.skip("no RssAnon in /proc/self/status here (Linux before 4.5)")
    return resident_memory() - anonymous


@pytest.fixture
def reset_allowed():
    if peak_memory(reset=True) is None:
        pytest.skip("no /proc/self/status here, or its peak cannot be reset")


@pytest.mark.slow
def test_peak_memory_follows_an_allocation_and_resets(reset_allowed):
    """Known answer: 400 MB touched raises the peak by at least that; after a reset (the memory
    freed) the peak is back near the current size."""
    gc.collect()  # what earlier tests left to free is freed before, not during, the measure
    peak_memory(reset=True)
    start, mapped = resident_memory(), _file_backed()  # just before the block
    block = np.ones(400 * MIB // 8)  # 400 MB, every page touched
    grown = peak_memory()
    # The peak is at least the size now, which holds the block and everything held at the start
    # but the mapped files' pages the kernel dropped meanwhile (other processes' pressure on a
    # busy machine: 16 MB of them once): those are no part of the block, so they are added back.
    dropped = max(0, mapped - _file_backed())
    assert grown - start + dropped >= 390 * MIB
    del block
    assert peak_memory(reset=True) > grown - SLACK  # the peak it ends is the block's
    assert peak_memory() < grown - 300 * MIB


def test_resident_memory_is_the_current_size_under_the_peak(reset_allowed):
    block = np.ones(200 * MIB // 8)
    held = resident_memory()
    assert held <= peak_memory() + SLACK
    del block
    assert resident_memory() < held - 150 * MIB and peak_memory() > held - SLACK  # freed; the peak stays


def test_a_system_that_does_not_say_gives_none(monkeypatch, tmp_path):
    monkeypatch.setattr(memory, "STATUS", str(tmp_path / "absent"))
    monkeypatch.setattr(memory, "CLEAR_REFS", str(tmp_path / "no" / "clear_refs"))
    assert peak_memory() is None and resident_memory() is None and peak_memory(reset=True) is None
    (tmp_path / "absent").write_text("Name:\tpython\nVmHWM:\t  2048 kB\nVmRSS:\t  1024 kB\n")
    assert peak_memory() == 2 * MIB and resident_memory() == MIB
    assert peak_memory(reset=True) is None  # read, but the peak could not be reset


def test_the_writer_reads_its_peaks_here():
    from precompute import pair

    assert pair.peak_memory is peak_memory


def test_the_reader_needs_only_the_standard_library():
    """No torch, no streamlit: a benchmark's child process imports it before measuring."""
    tree = ast.parse(Path(memory.__file__).read_text())
    imported = {a.name.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.Import) for a in node.names}
    imported |= {node.module.split(".")[0] for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported


def test_no_other_file_reads_the_process_status():
    """One reader: nothing else in the project opens /proc/self/status or resets the peak."""
    needles = ("/proc/self/status", "clear_refs")
    files = [ROOT / "app.py", *(p for d in ("tying", "precompute", "explorer", "views", "bench", "tests")
                                 for p in (ROOT / d).rglob("*.py"))]
    readers = {Path(memory.__file__).resolve(), Path(__file__).resolve()}  # the reader, and this test of it
    found = [f"{p.relative_to(ROOT)}: {n}" for p in files
             if p.resolve() not in readers and "out" not in p.relative_to(ROOT).parts
             for n in needles if n in p.read_text()]
    assert len(files) > 50 and found == []
