"""How a worker process's start and end are told to the caller: the exit status of a worker found dead, a main
script without ``if __name__ == "__main__":`` (spawn, forkserver), and a start refused in a daemonic process."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import re
import signal
import sys

from vecenv.errors import add_note

__all__ = [
    "DEBUG_ENV_VAR",
    "EXIT_MAIN_REIMPORTED",
    "describe_exit",
    "exit_if_importing_main",
    "note_daemonic_parent",
    "script_without_main_guard",
]

_MAIN_GUARD = re.compile(r"""__name__\s*==\s*['"]__main__['"]|['"]__main__['"]\s*==\s*__name__""")


def script_without_main_guard() -> str | None:
    """The path of the main script if it has no ``if __name__ == "__main__":`` test, else None (also when the
    program is not a script: an interactive session, ``python -c``, a notebook)."""
    path = getattr(sys.modules.get("__main__"), "__file__", None)
    if not isinstance(path, str) or not path.endswith(".py"):
        return None
    try:
        with open(path, encoding="utf-8") as file:
            source = file.read()
    except (OSError, UnicodeDecodeError):
        return None
    return None if _MAIN_GUARD.search(source) else path


#: Exit status of a process that multiprocessing was starting (spawn, forkserver) when the parent's main script,
#: which it imports first, tried to start vecenv worker processes: the script has no ``__main__`` guard.
EXIT_MAIN_REIMPORTED = 86  # uncommon, so that an env exiting with a status of its own is not taken for it
#: Set to 1 to let such a process fail with multiprocessing's own error and traceback instead.
DEBUG_ENV_VAR = "VECENV_DEBUG"


def exit_if_importing_main() -> None:
    """End this process quietly (status :data:`EXIT_MAIN_REIMPORTED`) if it is a process multiprocessing is
    starting and is importing the parent's main script (its bootstrapping phase), which now tries to start
    worker processes: a script without ``if __name__ == "__main__":``. Starting would fail with
    multiprocessing's RuntimeError and a long traceback from every such process; the parent explains instead
    (:meth:`SubprocWorker._died`). With ``VECENV_DEBUG=1`` multiprocessing's error is left as it is.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False) and os.environ.get(DEBUG_ENV_VAR) != "1":
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(EXIT_MAIN_REIMPORTED)


def describe_exit(exitcode: int | None, pid: int | None) -> str:
    """How worker process ``pid`` ended, from its ``exitcode`` (multiprocessing's: None if not known), to follow
    "The worker process N running envs [...]" in an error."""
    if exitcode is None:
        try:
            if pid is not None:
                os.kill(pid, 0)
        except ProcessLookupError:  # gone, and not our child to reap any more
            return (
                "ended (with an exit code vecenv cannot know: its exit status was collected elsewhere, as where "
                "this program ignores SIGCHLD or reaps child processes in a SIGCHLD handler of its own)"
            )
        except OSError:  # (another process now has that number: ours is gone all the same)
            return "ended (with an exit code vecenv cannot know)"
        return "is unresponsive"
    if exitcode < 0:
        try:
            name = signal.Signals(-exitcode).name
        except ValueError:
            name = f"signal {-exitcode}"
        hint = " (most often the out-of-memory killer)" if -exitcode == signal.SIGKILL else ""
        return f"was killed by {name}{hint}"
    return f"exited with code {exitcode}"


def note_daemonic_parent(exc: BaseException) -> None:
    """``exc`` was raised starting a worker process: if this process is a daemonic one (multiprocessing's
    ``AssertionError``: "daemonic processes are not allowed to have children"), say what to do instead."""
    if multiprocessing.current_process().daemon:
        add_note(
            exc,
            "vecenv: this process is a daemonic multiprocessing process (a multiprocessing.Pool worker, a torch "
            "DataLoader worker, an env of another SubprocVecEnv...), which cannot start the SubprocVecEnv's "
            "worker processes. Step the envs here with DummyVecEnv, or build the vector env in a process that is "
            "not daemonic (multiprocessing.Process(daemon=False), concurrent.futures.ProcessPoolExecutor).",
        )
