"""This process's resident memory, as Linux reports it in /proc/self/status: the peak since the
last reset (VmHWM) and the current size (VmRSS).

The one reader of those figures: the writer's per-stage peaks (the pair command's) and the
benchmarks (bench/) use it. A reset (writing 5 to /proc/self/clear_refs, Linux 4.0 on) starts
a new peak from the current size, so a stage's peak does not include the stages before it.
Where the system does not say (another OS, a sandbox that hides /proc), the functions return
None. Standard library only: no torch, no streamlit.
"""

from __future__ import annotations

STATUS = "/proc/self/status"
CLEAR_REFS = "/proc/self/clear_refs"
_RESET_PEAK = "5"  # clear_refs: reset the peak resident size to the current one


def _status(field: str) -> int | None:
    """``field`` of /proc/self/status (a size in kB there) in bytes; None where it is absent."""
    try:
        with open(STATUS) as fh:
            return next((int(line.split()[1]) * 1024 for line in fh if line.startswith(field + ":")), None)
    except OSError:
        return None


def peak_memory(reset: bool = False) -> int | None:
    """This process's peak resident memory in bytes since the last reset (VmHWM).

    ``reset`` then starts a new peak from the current size. None where the system does not
    say, or (with ``reset``) does not let the peak be reset: a caller that measures from a
    reset, as the benchmarks do, knows from None that it could not.
    """
    peak = _status("VmHWM")
    if reset:
        try:
            with open(CLEAR_REFS, "w") as fh:
                fh.write(_RESET_PEAK)
        except OSError:
            return None
    return peak


def resident_memory() -> int | None:
    """This process's resident memory now, in bytes (VmRSS); None where the system does not say."""
    return _status("VmRSS")
