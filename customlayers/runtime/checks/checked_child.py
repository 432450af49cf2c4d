"""A check's child process (--check-bounds, --sanitize) under the time limit a kernel that never
ends needs: a note on stderr once it has run NOTE_AFTER_S (so that a CI log or a terminal shows
why nothing happens), stopped at settings.check_timeout_s() (CUSTOMLAYERS_CHECK_TIMEOUT).
"""
from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys

from ... import settings

NOTE_AFTER_S = 30.0
PR_SET_PDEATHSIG = 1            # Linux's prctl option
PARENT_FLAG = "--parent-pid="   # the last argument of a check's child: who started it


def run_checked(command: list[str], env: dict, what: str) -> subprocess.CompletedProcess | None:
    """`command` run to its end (text output captured), or None when it ran past the limit
    (then killed). `what` names the kernel and check for the note."""
    limit = settings.check_timeout_s()
    # (its last argument names this process: end_with_parent checks it is still its parent)
    child = subprocess.Popen(command + [f"{PARENT_FLAG}{os.getpid()}"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        try:
            out, err = child.communicate(timeout=min(NOTE_AFTER_S, limit))
        except subprocess.TimeoutExpired:
            if limit <= NOTE_AFTER_S:
                raise
            print(f"note: {what} is still running after {NOTE_AFTER_S:g} s; it is stopped at "
                  f"{limit:g} s (CUSTOMLAYERS_CHECK_TIMEOUT)", file=sys.stderr, flush=True)
            out, err = child.communicate(timeout=limit - NOTE_AFTER_S)
    except subprocess.TimeoutExpired:
        child.kill()
        child.communicate()
        return None
    except BaseException:            # an interrupt: the child goes with the parent
        child.kill()
        child.communicate()
        raise
    return subprocess.CompletedProcess(command, child.returncode, out, err)


def end_with_parent() -> None:
    """Called first in a check's child: killed when the process that started it ends (Linux's
    parent-death signal), as it is at the time limit. A parent ended by SIGTERM left its child
    spinning in a kernel that never ends, with no limit (a reviewer's find). A parent that ended
    before the signal was set (while the child imported) is no longer its parent: the child
    exits. Elsewhere, or where the call fails, nothing."""
    given = next((a for a in sys.argv[1:] if a.startswith(PARENT_FLAG)), None)
    if given is not None:
        sys.argv.remove(given)
    if not sys.platform.startswith("linux"):
        return
    try:
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)
    except (OSError, AttributeError):
        return
    if given is not None and os.getppid() != int(given[len(PARENT_FLAG):]):
        os._exit(1)
