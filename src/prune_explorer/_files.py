"""The one way prune-explorer writes an output file (the CLI and the demo checkpoints use it).

What happens depends on what the path names now:

* a regular file or a new path: written atomically -- to a temporary file in the same folder,
  flushed to disk, then renamed over the path, keeping the old file's permission bits. A
  symlink is followed: its target is replaced and the link stays a link;
* a character device (``/dev/null``, a terminal) or a FIFO: written through (opened and
  written, never replaced);
* ``-`` or a path that is this process's standard output (``/dev/stdout``): written to
  ``sys.stdout``;
* anything else (a folder, a block device, a socket) or one of the command's inputs: refused;
* a regular file that is read-only (no write bit for anyone) or owned by another user is not
  replaced unless ``force=True`` (``--force``): root could replace either, and would.

:func:`write_outputs` writes several files as one: each to a temporary file first, then all
renamed into place; if a rename fails, the files already replaced get their old contents back
(and new ones are removed), so the outputs are all new or all old.

While a temporary file is written, SIGTERM and SIGHUP raise :class:`Terminated` (a
``KeyboardInterrupt``) instead of killing the process, so the temporary file is always removed
and the old file left as it was -- on an error, Ctrl-C or a kill alike. While files are renamed
into place (or put back) those signals and Ctrl-C wait, and one that waited puts the old files
back before it is raised: an interrupted write leaves every output as it was and no stray file.
Inside :func:`provisional` (the CLI runs each command in one) the old files' backups are kept
until the block returns, so a failure or signal anywhere before that -- after the last rename
too -- puts every old file back.

Examples
--------
>>> import tempfile
>>> from pathlib import Path
>>> path = Path(tempfile.mkdtemp()) / "out.txt"
>>> write_output(path, b"hello", "--out")
>>> path.read_bytes()
b'hello'
>>> check_output("/dev/null", "--out")  # a device: written through, never replaced
'through'
"""

from __future__ import annotations

import contextlib
import contextvars
import os
import shutil
import signal
import stat
import sys
import uuid
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

__all__ = [
    "OutputError",
    "Provisional",
    "Terminated",
    "check_output",
    "is_stdout",
    "provisional",
    "write_output",
    "write_outputs",
]

Kind = Literal["atomic", "through", "stdout"]
STDOUT = "-"


class OutputError(OSError):
    """An output path that cannot or must not be written; the message names the option."""


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived while an output file was being written."""

    def __init__(self, signum: int) -> None:
        super().__init__(f"terminated by {signal.Signals(signum).name}")
        self.signum = signum


def _stat(path: str | os.PathLike[str]) -> os.stat_result | None:
    try:
        return os.stat(path)  # follows symlinks, /dev/stdout included
    except FileNotFoundError:
        return None


def _stat_or_none(path: str | os.PathLike[str]) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def is_stdout(path: str | os.PathLike[str]) -> bool:
    """Whether writing to ``path`` means writing to standard output (``-``, ``/dev/stdout``).

    Examples
    --------
    >>> is_stdout("-"), is_stdout("report.csv")
    (True, False)
    """
    if os.fspath(path) == STDOUT:
        return True
    try:
        target = _stat(path)
        return target is not None and os.path.samestat(target, os.fstat(1))
    except OSError:
        return False


def check_output(
    path: str | os.PathLike[str],
    what: str,
    inputs: Sequence[tuple[str, str | os.PathLike[str]]] = (),
    *,
    force: bool = False,
) -> Kind:
    """How ``path`` will be written; raises :class:`OutputError` if it must not be.

    ``what`` names the option in messages (``"-o/--output"``); ``inputs`` are the command's
    input files as ``(option, path)``: an output that is one of them is refused. A read-only
    file or one of another user is refused unless ``force``.

    Examples
    --------
    >>> check_output("-", "--csv"), check_output("/dev/null", "--csv")
    ('stdout', 'through')
    >>> check_output("/", "--csv")
    Traceback (most recent call last):
    ...
    prune_explorer._files.OutputError: --csv '/' is a folder; expected a file name
    """
    if is_stdout(path):
        return "stdout"
    shown = repr(os.fspath(path))
    try:
        target = _stat(path)
    except OSError as exc:
        raise OutputError(f"{what} {shown} cannot be resolved ({exc.strerror})") from None
    for option, source in inputs:
        other = _stat_or_none(source)
        if target is not None and other is not None and os.path.samestat(target, other):
            raise OutputError(
                f"{what} {shown} is the same file as {option} {os.fspath(source)!r}; "
                "refusing to overwrite an input: choose another output path"
            )
    if target is None or stat.S_ISREG(target.st_mode):
        folder = Path(os.path.realpath(path)).parent
        if not folder.is_dir():
            raise OutputError(f"{what} {shown}: folder {str(folder)!r} does not exist")
        if target is not None and not force:
            _check_replaceable(target, what, shown)
        return "atomic"
    if stat.S_ISCHR(target.st_mode) or stat.S_ISFIFO(target.st_mode):
        return "through"
    if stat.S_ISDIR(target.st_mode):
        raise OutputError(f"{what} {shown} is a folder; expected a file name")
    raise OutputError(
        f"{what} {shown} must be a regular file, a new path, a character device, a FIFO or "
        "'-' (standard output); it is a block device or a socket"
    )


def _check_replaceable(target: os.stat_result, what: str, shown: str) -> None:
    if not target.st_mode & 0o222:
        raise OutputError(f"{what} {shown} is read-only (mode {stat.filemode(target.st_mode)}); "
                          "refusing to replace it: pass --force to replace it anyway")
    uid = os.geteuid() if hasattr(os, "geteuid") else None
    if uid is not None and target.st_uid != uid:
        raise OutputError(f"{what} {shown} belongs to another user (uid {target.st_uid}); "
                          "refusing to replace it: pass --force to replace it anyway")


_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP")
                 if hasattr(signal, name))


class _Held:
    """SIGINT, SIGTERM and SIGHUP while outputs are written: while :attr:`is_open` (a temporary
    file being filled: long, and undone by removing it) one raises at once -- Ctrl-C a
    ``KeyboardInterrupt``, the others :class:`Terminated` -- and otherwise (files being renamed,
    put back or removed) it waits in :attr:`arrived` until :meth:`check` raises it, so that a
    rename and its bookkeeping never part. A signal the process ignored stays ignored."""

    def __init__(self) -> None:
        self.is_open = False
        self.arrived: list[int] = []
        self.previous: dict[int, object] = {}

    def handle(self, signum: int, _frame: object) -> None:
        if self.previous.get(signum) == signal.SIG_IGN:
            return
        if self.is_open:
            raise _exception(signum)
        self.arrived.append(signum)

    def check(self) -> None:
        """Raise the first signal that arrived while held, if any."""
        if self.arrived:
            raise _exception(self.arrived[0])


def _exception(signum: int) -> KeyboardInterrupt:
    return KeyboardInterrupt() if signum == signal.SIGINT else Terminated(signum)


@contextlib.contextmanager
def _signals_held(*, check: bool = True) -> Iterator[_Held]:
    # Outside the main thread no handler can be set, and no signal arrives there.
    held = _Held()
    try:
        with contextlib.suppress(ValueError):
            for signum in _SIGNALS:
                held.previous[signum] = signal.signal(signum, held.handle)
        yield held
    finally:
        for signum, old in held.previous.items():
            signal.signal(signum, old)  # type: ignore[arg-type]
    if check:
        held.check()  # arrived after the outputs were settled: still an interrupt


class Provisional:
    """The outputs written inside :func:`provisional`, each with the backup of its old file.

    Attributes
    ----------
    written : list of (Path, Path or None)
        Each output replaced, in order, with the backup of its old contents (None: the path
        was new).
    succeeded : bool
        Set it False inside the block to have the old files put back when it ends (a command
        that returns a failure status).
    final : bool
        Whether the outputs became final (the block returned with ``succeeded``, and no signal
        was waiting).
    late : int or None
        A signal that arrived after the outputs became final (while the backups were
        removed): the command had succeeded by then, so it changed nothing.
    """

    def __init__(self) -> None:
        self.written: list[tuple[Path, Path | None]] = []
        self.succeeded = True
        self.final = False
        self.late: int | None = None

    def undo(self) -> None:
        """Put every old file back and remove the new ones (call it with signals held)."""
        while self.written:
            target, backup = self.written[-1]
            with contextlib.suppress(OSError):  # a backup that cannot go back stays beside
                if backup is None:
                    target.unlink(missing_ok=True)
                else:
                    os.replace(backup, target)
            self.written.pop()

    def commit(self) -> None:
        """Make the outputs final: remove the backups (call it with signals held)."""
        while self.written:
            _, backup = self.written.pop()
            if backup is not None:
                with contextlib.suppress(OSError):
                    backup.unlink()

    def __repr__(self) -> str:
        return (f"Provisional(written={[str(t) for t, _ in self.written]}, "
                f"final={self.final}, late={self.late})")


_PROVISIONAL: contextvars.ContextVar[Provisional | None] = contextvars.ContextVar(
    "prune_explorer_provisional_outputs", default=None)


@contextlib.contextmanager
def provisional(record: Provisional | None = None) -> Iterator[Provisional]:
    """Outputs written in the block stay undoable until it ends: the backups of the files they
    replace are kept, and if the block raises anything (an error, Ctrl-C, SIGTERM, SIGHUP: these
    raise :class:`KeyboardInterrupt` / :class:`Terminated` inside it) every old file is put back
    and every new one removed. When the block returns, the outputs become final at one instant
    -- a signal that arrived by then undoes them and is raised instead -- and the backups are
    removed. Signals are held from there to the end (:attr:`Provisional.late` tells of one that
    came after that instant: too late to change anything). ``record`` (default: a new one) is
    what the block gets. Used around each CLI command.

    Examples
    --------
    >>> import tempfile
    >>> path = Path(tempfile.mkdtemp()) / "out.txt"
    >>> path.write_bytes(b"old")
    3
    >>> try:
    ...     with provisional():
    ...         write_output(path, b"new", "--out")
    ...         raise ValueError("a later step failed")
    ... except ValueError:
    ...     pass
    >>> path.read_bytes(), sorted(p.name for p in path.parent.iterdir())
    (b'old', ['out.txt'])
    """
    record = Provisional() if record is None else record
    with _signals_held(check=False) as held:
        try:
            token = _PROVISIONAL.set(record)
            held.is_open = True  # a signal raises at once inside the block
            try:
                yield record
            finally:
                held.is_open = False
                _PROVISIONAL.reset(token)
            held.check()  # arrived as the block ended: before the outputs became final
            if not record.succeeded:
                record.undo()
                held.check()  # a signal during the undo: the command ends as interrupted
        except BaseException as err:
            record.undo()
            if held.arrived and not isinstance(err, KeyboardInterrupt):
                raise _exception(held.arrived[0]) from err  # a Ctrl-C during the undo
            raise
        record.final = True  # the instant the outputs become final
        record.commit()
    if held.arrived:  # (read once the handlers are back: none can be added after this)
        record.late = held.arrived[0]


def _temporary(target: Path, suffix: str = "tmp") -> Path:
    return target.parent / f".{target.name}.{os.getpid()}.{uuid.uuid4().hex}.{suffix}"


def _write_temporary(target: Path, tmp: Path, data: bytes) -> None:
    old = _stat(target)
    with open(tmp, "xb") as file:  # plain open: a new file's mode follows the umask
        if old is not None:
            os.chmod(file.fileno(), stat.S_IMODE(old.st_mode))
        file.write(data)
        file.flush()
        os.fsync(file.fileno())


def _keep_old(target: Path, backups: list[Path]) -> None:
    """Add a copy of ``target``'s current contents beside it to ``backups`` (a hard link where
    the file system has them) before anything can stop it; nothing when there is no file."""
    if _stat(target) is None:
        return
    backup = _temporary(target, "old")
    backups.append(backup)  # listed first: the clean-up removes it whatever happens next
    try:
        os.link(target, backup)
    except OSError:
        shutil.copy2(target, backup)


def _write_all(targets: list[Path], data: list[bytes]) -> None:
    """Write each ``data`` to its target: all new, or (on any failure, Ctrl-C or termination)
    all as they were, with no temporary or backup file left.

    The temporary files are filled while signals raise at once; renaming them into place,
    putting old files back and removing what is left run with signals held, and a signal held
    until the last rename is done still puts every old file back: a Ctrl-C or kill never
    leaves a new file.
    """
    tmps = [_temporary(target) for target in targets]
    backups: list[Path] = []
    olds: list[Path | None] = []
    with _signals_held() as held:
        try:
            for target, tmp, contents in zip(targets, tmps, data, strict=True):
                held.is_open = True
                try:
                    _write_temporary(target, tmp, contents)
                finally:
                    held.is_open = False
            held.check()
            _replace_all(targets, tmps, backups, olds, held)
            kept = _PROVISIONAL.get()
            if kept is not None:  # the backups stay until the command ends (provisional)
                kept.written += zip(targets, olds, strict=True)
                backups.clear()
        finally:
            for path in (*tmps, *backups):
                with contextlib.suppress(OSError):
                    path.unlink()


def _replace_all(targets: list[Path], tmps: list[Path], backups: list[Path],
                 olds: list[Path | None], held: _Held) -> None:
    """Rename each temporary file over its target (signals held); on any failure, or a signal
    that arrived meanwhile, put the old ones back. ``olds[i]`` is target ``i``'s backup (None:
    there was no file), listed before the rename."""
    try:
        for target, tmp in zip(targets, tmps, strict=True):
            count = len(backups)
            _keep_old(target, backups)
            olds.append(backups[-1] if len(backups) > count else None)
            os.replace(tmp, target)
        held.check()  # a signal that waited for the renames: nothing is written after all
    except BaseException:
        for target, old in zip(targets, olds, strict=False):
            with contextlib.suppress(OSError):
                if old is None:
                    target.unlink(missing_ok=True)
                else:
                    os.replace(old, target)
        raise


def write_output(
    path: str | os.PathLike[str],
    data: bytes,
    what: str,
    inputs: Sequence[tuple[str, str | os.PathLike[str]]] = (),
    *,
    force: bool = False,
) -> None:
    """Write ``data`` to ``path`` by the rules of the module docstring.

    Raises
    ------
    OutputError
        The path is refused (see :func:`check_output`) or cannot be written; ``path`` is then
        unchanged when it is a regular file.
    Terminated
        SIGTERM/SIGHUP arrived during an atomic write (the old file is unchanged).
    """
    kind = check_output(path, what, inputs, force=force)
    sys.stdout.flush()  # what was printed before comes first on a shared terminal or pipe
    try:
        if kind == "stdout":
            sys.stdout.buffer.write(data)
            sys.stdout.buffer.flush()
        elif kind == "through":
            with open(path, "wb") as file:
                file.write(data)
        else:
            _write_all([Path(os.path.realpath(path))], [data])  # through symlinks
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise OutputError(f"{what} {os.fspath(path)!r} cannot be written ({reason})") from None


def write_outputs(
    outputs: Sequence[tuple[str | os.PathLike[str], bytes, str]],
    inputs: Sequence[tuple[str, str | os.PathLike[str]]] = (),
    *,
    force: bool = False,
) -> None:
    """Write each ``(path, data, what)`` of ``outputs`` so that they are all new or all old.

    Every path must be a regular file or a new path (see :func:`check_output`): all are written
    to temporary files, then renamed into place; if a rename fails (or SIGTERM/SIGHUP/Ctrl-C
    arrives), the files already replaced get their old contents back.

    Raises
    ------
    OutputError
        A path is refused or cannot be written; every path is then as it was.

    Examples
    --------
    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> write_outputs([(folder / "a", b"1", "OUT"), (folder / "b", b"2", "OUT.json")])
    >>> (folder / "a").read_bytes() + (folder / "b").read_bytes()
    b'12'
    """
    for path, _, what in outputs:
        if check_output(path, what, inputs, force=force) != "atomic":
            raise OutputError(f"{what} {os.fspath(path)!r} must be a regular file or a new path "
                              "(it is written together with the other outputs)")
    targets = [Path(os.path.realpath(path)) for path, _, _ in outputs]
    try:
        _write_all(targets, [data for _, data, _ in outputs])
    except OSError as exc:
        reason = exc.strerror or str(exc)
        shown = ", ".join(repr(os.fspath(path)) for path, _, _ in outputs)
        raise OutputError(f"{shown} cannot be written ({reason}); all are as they were") \
            from None
