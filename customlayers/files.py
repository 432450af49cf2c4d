"""Files, read and written safely.

Reading a file the user named (a config, a kernel source, a model, its weights, an input array,
a Python layer): `read_user_file` and `open_user_file` read regular files only, up to a size
bound. A FIFO would block the reader forever and a device (/dev/zero, a symlink to it) would be
read until memory runs out, so anything that is not a regular file is refused before a byte is
read, and so is a file over the bound its kind has. The refusal is a `UserFileError`, an OSError
(errno, strerror, filename), so every `except OSError` that reports an unreadable file reports
it in the same words ("cannot read the config x.xml: not a regular file (a FIFO)").

Writing a file so that it is whole or absent: a temporary file in the target's own folder
(so os.replace is a rename on one file system), then the rename. A temporary is named
`.<target name>.<random>.tmp`; a process killed between the two leaves one behind, and the next
write of the same target removes such leftovers once they are old enough that no live writer
can own them."""
from __future__ import annotations

import errno
import os
import stat
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO, Iterator

MIB = 1 << 20


class UserFileError(OSError):
    """A file the user named that is not read: not a regular file, or over its size bound."""


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a file"


def size_text(nbytes: int) -> str:
    """Bytes for a message: '512 bytes', '3.2 MiB', '16 MiB'."""
    if nbytes < 1024:
        return f"{nbytes} bytes"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            value = nbytes / (1 << shift)
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes} bytes"


def _refuse_unless_regular(mode: int, path) -> None:
    if stat.S_ISREG(mode):
        return
    if stat.S_ISDIR(mode):       # the words open() would say, as before this check existed
        raise UserFileError(errno.EISDIR, os.strerror(errno.EISDIR), path)
    raise UserFileError(errno.EINVAL, f"not a regular file ({_kind(mode)}); only regular "
                                      f"files are read", path)


def _refuse_over(size: int, limit: int | None, path) -> None:
    if limit is not None and size > limit:
        raise UserFileError(errno.EFBIG, f"{size_text(size)}, over the bound of "
                                         f"{size_text(limit)} for this kind of file", path)


def open_user_file(path, limit: int | None = None) -> BinaryIO:
    """The regular file at `path` (symlinks followed), open for reading in binary; UserFileError
    when it is anything else or larger than `limit` bytes, OSError when it cannot be opened.
    Checked before opening (a FIFO's open would block) and again on what was opened (the path
    may have changed in between); opened without blocking, then made blocking."""
    _refuse_unless_regular(os.stat(path).st_mode, path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        _refuse_unless_regular(info.st_mode, path)
        _refuse_over(info.st_size, limit, path)
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_user_file(path, limit: int | None = None) -> bytes:
    """The bytes of the regular file at `path` (see open_user_file), at most `limit` of them:
    a file that grew past the bound while read is refused too. Without a limit, the size the
    file had when opened is read (a file that grows is read as it was)."""
    with open_user_file(path, limit) as f:
        size = os.fstat(f.fileno()).st_size
        if limit is None:
            return f.read(size)
        # up to the bound, in the chunks the file gives (read(limit + 1) would allocate the
        # whole bound at once; a file of size 0 may still hold data: /proc)
        chunks, total = [], 0
        while total <= limit:
            chunk = f.read(min(max(size, MIB), limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
        _refuse_over(total, limit, path)
        return b"".join(chunks) if len(chunks) != 1 else chunks[0]


def check_user_file(path, limit: int | None = None) -> None:
    """Raise as open_user_file would, for a file another reader (import, numpy) opens."""
    open_user_file(path, limit).close()


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
    to a user (`.t.json.srnm4mch.tmp: No such file or directory`). An error without an errno
    keeps its own words: numpy's short write on a full disk ("12288 requested and 992 written")
    read "[Errno None] None" before."""
    if error.errno is None:
        why = str(error) or type(error).__name__
        if "requested and" in why and "written" in why:
            why += " (is the disk full?)"
        return type(error)(errno.EIO, why, str(target))
    return type(error)(error.errno, error.strerror, str(target))


def user_file_mode() -> int:
    """The permission bits open() would give a new file: 0666 less the process umask (the
    files a user asked for; mkstemp's 0600 suits only private caches). POSIX reads the umask
    only by setting it, so it is set back at once (callers write from one thread)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask
