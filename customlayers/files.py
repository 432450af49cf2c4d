"""Writing a file so that it is whole or absent: a temporary file in the target's own folder
(so os.replace is a rename on one file system), then the rename. A temporary is named
`.<target name>.<random>.tmp`; a process killed between the two leaves one behind, and the next
write of the same target removes such leftovers once they are old enough that no live writer
can own them."""
from __future__ import annotations

import os
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

# a writer that has not renamed its temporary after this long was killed
STALE_AFTER_S = 600


def remove_stale_temporaries(target: Path, now: float | None = None) -> int:
    """Remove the leftover temporaries of `target` (see the module docstring); their count."""
    now = time.time() if now is None else now
    removed = 0
    try:
        candidates = list(target.parent.glob(f".{target.name}.*.tmp"))
    except OSError:
        return 0
    for leftover in candidates:
        try:
            if now - leftover.stat().st_mtime > STALE_AFTER_S:
                leftover.unlink()
                removed += 1
        except OSError:
            continue               # another process removed it, or it is not ours to remove
    return removed


@contextmanager
def atomic_writer(target: Path, mode: int | None = None) -> Iterator[BinaryIO]:
    """`with atomic_writer(path) as f: f.write(...)`: the file appears whole when the block
    ends, and not at all when it raises. `mode`: the new file's permission bits (mkstemp's
    0600 otherwise)."""
    target = Path(target)
    remove_stale_temporaries(target)
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    except OSError as e:
        raise _naming(e, target) from e
    try:
        with os.fdopen(fd, "wb") as f:
            if mode is not None:
                os.fchmod(f.fileno(), mode)
            yield f
        os.replace(tmp, target)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.filename in (None, tmp):
            raise _naming(e, target) from e
        raise


def _naming(error: OSError, target: Path) -> OSError:
    """The same error about the file the caller asked for: the temporary's name means nothing
    to a user (`.t.json.srnm4mch.tmp: No such file or directory`)."""
    return type(error)(error.errno, error.strerror, str(target))


def user_file_mode() -> int:
    """The permission bits open() would give a new file: 0666 less the process umask (the
    files a user asked for; mkstemp's 0600 suits only private caches). POSIX reads the umask
    only by setting it, so it is set back at once (callers write from one thread)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
