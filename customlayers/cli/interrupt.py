"""Ctrl-C that ends the command even while the host waits on the device.

Python runs its SIGINT handler (KeyboardInterrupt) in the main thread between bytecodes. A
command waiting for a kernel that never ends (a loop whose exit the data never reaches) sits in
one OpenCL call, and Ctrl-C did nothing until SIGTERM. The C-level handler still writes the
signal's number to the wakeup fd (signal.set_wakeup_fd); a daemon thread blocked on that fd
wakes, gives the main thread a moment to end as usual, and otherwise ends the process with
exit 130: a kernel that is running cannot be stopped, only its process. The waits that can be
interrupted so are those that let go of the GIL (pyopencl's Event.wait and queue.finish; PoCL's
reads block holding it, so the kernel path waits for its event first: execute/kernel.py).
Only for the command line (main() without argv): a test or a user's program calling main([...])
keeps its own signal handling."""
from __future__ import annotations

import os
import signal
import socket
import sys
import threading
import time

# how long the main thread has to end by its KeyboardInterrupt before the process is ended
GRACE_SECONDS = 1.0


def end_on_interrupt() -> None:
    """Arm the watch (once, from the main thread, where SIGINT is not ignored)."""
    if threading.current_thread() is not threading.main_thread() or \
            signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        return
    reader, writer = socket.socketpair()
    writer.setblocking(False)
    try:
        signal.set_wakeup_fd(writer.fileno(), warn_on_full_buffer=False)
    except ValueError:                  # not the main thread of the main interpreter
        reader.close()
        writer.close()
        return
    threading.Thread(target=_watch, args=(reader, writer), name="customlayers-interrupt",
                     daemon=True).start()


def _watch(reader: socket.socket, writer: socket.socket) -> None:
    while True:
        try:
            data = reader.recv(64)
        except OSError:
            return
        if not data:
            return
        if signal.SIGINT in data:
            time.sleep(GRACE_SECONDS)
            print("interrupted while the device was running a kernel, which cannot be stopped: "
                  "the process ends here", file=sys.stderr, flush=True)
            os._exit(130)
