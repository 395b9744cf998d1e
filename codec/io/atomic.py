"""Writing files safely: a file is replaced atomically (temp file beside it, fsync, rename, fsync
of the directory), with the caller's umask mode, never through a FIFO/device/socket (a symlink
is written through: its target is replaced, the link stays); temps of killed earlier writers
are recognised by name and removed; directories are locked or swapped atomically for writers
that install several files."""
from __future__ import annotations

import errno
import os
import re
import shutil
import socket
import stat
import tempfile
from contextlib import contextmanager
from typing import BinaryIO, Iterator

from ..errors import UsageError
from .sources import _KINDS

#: every temporary file or directory a writer makes beside its target is named
#: ``.<target name>.modelcodec-<pid>@<host>.<random>``: recognisable, and stale once <pid> is
#: gone from <host> -- which only a writer on that host can tell (a directory shared over NFS
#: or mounted in several containers holds temporaries of writers whose pids mean nothing here)
TEMP_MARK = ".modelcodec-"


def _host() -> str:
    """Where a pid means something, as a temporary's name holds it (letters, digits, '-' and
    '_'): this machine's name and, on Linux, its pid namespace (containers that share a host
    name and a directory still see different pids)."""
    name = "".join(c if c.isascii() and (c.isalnum() or c in "-_") else "_" for c in socket.gethostname())[:64]
    try:
        name += f"-{os.stat('/proc/self/ns/pid').st_ino:x}"
    except OSError:
        pass
    return name or "_"


def caller_umask() -> int:
    """The process umask, read without changing it (Linux: /proc/self/status), else the
    classic set-and-restore."""
    try:
        with open("/proc/self/status", "rb") as f:
            for line in f:
                if line.startswith(b"Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    m = os.umask(0o022)
    os.umask(m)
    return m


def give_default_mode(fd_or_path, directory: bool = False) -> None:
    """The mode open()/mkdir() would have given under the caller's umask (0644/0755 under 022);
    mkstemp/mkdtemp make 0600/0700, which a web server cannot serve."""
    mode = (0o777 if directory else 0o666) & ~caller_umask()
    if isinstance(fd_or_path, int):
        os.fchmod(fd_or_path, mode)
    else:
        os.chmod(fd_or_path, mode)


def temp_prefix(path: str) -> str:
    return "." + os.path.basename(path) + TEMP_MARK + f"{os.getpid()}@{_host()}."


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def remove_stale_temps(path: str) -> list[str]:
    """Remove the temporaries of earlier writers of ``path`` on this host that were killed
    (their pid is gone); returns what was removed.  Only names this module makes are touched,
    and never one of another host (or of a version that did not name its host): whether its
    writer still runs cannot be told from here."""
    d = os.path.dirname(os.path.abspath(path)) or "."
    head, here = "." + os.path.basename(path) + TEMP_MARK, _host()
    removed = []
    try:
        names = os.listdir(d)
    except OSError:
        return removed
    for n in names:
        if not n.startswith(head):
            continue
        pid, _, host = n[len(head):].split(".", 1)[0].partition("@")
        if host != here or not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        full = os.path.join(d, n)
        try:
            if os.path.isdir(full) and not os.path.islink(full):
                shutil.rmtree(full)
            else:
                os.unlink(full)
            removed.append(full)
        except OSError:
            pass
    return removed


def refuse_special_target(path: str) -> None:
    """A writer's target may be missing, a regular file, or a symlink to either (written
    through: see :func:`write_target`); a FIFO, device, socket or directory -- itself or behind
    a link -- is refused, and so is a target whose directory does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        d = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(d):
            raise UsageError(f"{path}: cannot write here: the directory {d} does not exist") from None
        return
    except OSError as e:
        raise UsageError(f"{path}: cannot write here: {e.strerror or e}") from None
    if not stat.S_ISREG(st.st_mode):
        kind = next((k for test, k in _KINDS if test(st.st_mode)), "not a regular file")
        raise UsageError(f"{path}: refusing to replace {kind} (writers replace regular files only)")


#: a destination that names a URL scheme (http://, s3://, gs://, file://...)
_URL = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def refuse_url(path) -> None:
    """A destination that is a URL of any scheme is a UsageError naming the scheme: writers
    write local files only (never a local path named "s3:/bucket/...")."""
    url = _URL.match(path) if isinstance(path, str) else None
    if url:
        raise UsageError(f"{path}: a URL ({url.group(1)}://) is not a destination: modelcodec writes local "
                         "files only (write to a local path, then upload it)")


def write_target(path: str) -> str:
    """Where writing ``path`` puts the file: ``path`` itself, or for a symlink the file it
    leads to (every link of a chain followed, as ``open()`` follows it), so that the new file
    replaces the link's target atomically and the link stays.  A dangling link is written
    through as well: its target is created (as ``open(path, "w")`` would)."""
    if not os.path.islink(path):
        return path
    return os.path.realpath(path)


def check_target(path: str) -> str:
    """What :func:`atomic_write` refuses of ``path`` before it writes anything (a FIFO, device,
    socket or directory -- itself or behind a link --, a directory that does not exist); where
    the file goes (:func:`write_target`) when none of it."""
    refuse_special_target(path)
    real = write_target(path)
    if real != path:
        refuse_special_target(real)  # (the directory of a dangling link's target)
    return real


@contextmanager
def atomic_write(path, *, replace: bool = True) -> Iterator[BinaryIO]:
    """Write ``path`` through a temp file in the same directory: fsync, rename, fsync dir.

    On any exception the temp file is removed and ``path`` is untouched.  The file gets the
    caller's umask mode; the target must not be a FIFO/device/socket/directory, and a symlink is
    written through (its target is replaced, the link stays: :func:`write_target`); temps of
    killed earlier writers of the target are removed first.  An OSError of the file system
    (no space left, permission denied, a directory that does not exist...) is a UsageError
    naming ``path``, never the temporary.  ``replace=False``: the finished file takes the name
    only if nothing has it then (:func:`rename_new`: not even what appeared there while it was
    written) -- a link there, never written through, has it too; if something does, the temp
    is removed and a FileExistsError naming ``path`` raised (the caller says what it means).
    """
    path = os.fspath(path)
    real = check_target(path) if replace else path  # (not replacing: a link there has the name too)
    remove_stale_temps(real)
    d = os.path.dirname(os.path.abspath(real))
    try:
        fd, tmp = tempfile.mkstemp(prefix=temp_prefix(real), suffix=".tmp", dir=d)
    except OSError as e:
        raise os_error(path, e) from None
    f = os.fdopen(fd, "w+b", buffering=0)
    taken = False
    try:
        give_default_mode(fd)
        yield f
        f.flush()
        os.fsync(f.fileno())
        f.close()
        if replace:
            os.replace(tmp, real)
        elif not rename_new(tmp, real):
            taken = True
            raise FileExistsError(errno.EEXIST, "already there: not replaced", path)
        fsync_dir(d)
    except BaseException as e:
        f.close()
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(e, OSError) and not taken:
            raise os_error(path, e) from None
        raise


def os_error(path: str, e: OSError) -> UsageError:
    """A file system's refusal to write ``path``, naming ``path`` (not a temporary beside it)."""
    return UsageError(f"{path}: cannot write: {e.strerror or e}")


@contextmanager
def locked_dir(d: str) -> Iterator[None]:
    """An exclusive flock on the directory ``d`` itself (no lock file left behind): writers that
    install into ``d`` take turns."""
    import fcntl
    fd = os.open(d, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


#: renameat2's flags (linux/fs.h)
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def _renameat2(a: str, b: str, flag: int) -> bool:
    """Linux renameat2(``a``, ``b``, ``flag``): True when done, False when the system or the
    filesystem cannot (no such call, the flag not supported there); any other refusal is the
    OSError it is (EEXIST: a FileExistsError)."""
    import ctypes
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    at_fdcwd = -100
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    if fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), flag) == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.ENOTSUP, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), b)


def exchange(a: str, b: str) -> bool:
    """Swap two directory entries atomically (Linux renameat2 RENAME_EXCHANGE); False when the
    system or the filesystem cannot, so the caller falls back to two renames."""
    return _renameat2(a, b, RENAME_EXCHANGE)


def rename_new(src: str, dst: str) -> bool:
    """Give the file ``src`` (one the caller wrote) the name ``dst`` only if nothing has it --
    never replacing what is there, even what appears there a moment before: False when
    something (a file, a link, a folder...) has the name, ``src`` then left as it is.  In one
    step with renameat2 RENAME_NOREPLACE (Linux); where the system or the filesystem cannot, a
    hard link ``dst`` made (refused when the name is taken) then ``src`` unlinked; on a
    filesystem without hard links either, a look then a rename (a file put there between the
    two is replaced: the one case left).  Other refusals are the OSError they are."""
    d = os.path.dirname(os.path.abspath(dst))
    try:
        if not _renameat2(src, dst, RENAME_NOREPLACE):
            try:
                os.link(src, dst)
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.ENOSYS, errno.EMLINK):
                    raise  # (EEXIST too: the name is taken)
                if os.path.lexists(dst):
                    return False
                os.rename(src, dst)
            else:
                os.unlink(src)
    except FileExistsError:
        return False
    fsync_dir(d)
    return True


def fsync_dir(d: str) -> None:
    try:
        dfd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(dfd)
    except OSError:
        pass
    finally:
        os.close(dfd)
