"""Waiting for an inference without hanging on a failed dependency.

An event of the user's (a UserEvent, a kernel of theirs) that fails has a negative status. Some
drivers then fail every command that waits on it (PoCL does), others leave those commands
queued forever, and a blocking clWaitForEvents would never return. So while any of the user's
events is unfinished the host polls the statuses, with sleeps that grow to a bound, and
reports a failure as soon as it sees one; once they are all complete, what is left is the
network's own work and one blocking wait is safe.
"""
from __future__ import annotations

import time
from typing import Sequence

import pyopencl as cl

from ...errors import ExecutionError

COMPLETE = cl.command_execution_status.COMPLETE
# the polling interval grows from the first to the last (seconds)
FIRST_POLL_S = 20e-6
LONGEST_POLL_S = 2e-3


def status(event) -> int:
    return int(event.command_execution_status)


def failed_dependency(events: Sequence) -> tuple[int, int] | None:
    """(index, status) of the first event with a negative status, else None."""
    for i, e in enumerate(events):
        s = status(e)
        if s < 0:
            return i, s
    return None


def dependency_error(index: int, code: int) -> ExecutionError:
    return ExecutionError(f"wait_for event {index} failed (status {code}): the network did not "
                          f"run; its outputs were not written")


def await_dependencies(events: Sequence, done, timeout: float | None = None) -> bool:
    """True once every event in `events` (the user's) is complete, or `done` is finished;
    False when `timeout` seconds pass first. ExecutionError when one of them fails."""
    pending = [(i, e) for i, e in enumerate(events) if status(e) != COMPLETE]
    pause = FIRST_POLL_S
    start = time.perf_counter()
    while pending:
        still = []
        for i, e in pending:
            s = status(e)
            if s < 0:
                raise dependency_error(i, s)
            if s != COMPLETE:
                still.append((i, e))
        pending = still
        if not pending or status(done) == COMPLETE or status(done) < 0:
            return True         # a failed `done`: the caller's wait on it reports it
        if timeout is not None and time.perf_counter() - start > timeout:
            return False
        time.sleep(pause)
        pause = min(pause * 2, LONGEST_POLL_S)
    return True
