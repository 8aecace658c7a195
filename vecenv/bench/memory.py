"""Memory of a process tree (a process and all its descendants), read from Linux's ``/proc``.

Two measures, both summed over the tree:

- RSS (``VmRSS``): resident pages mapped by each process. Pages shared between processes (the code of
  shared libraries, pages inherited copy-on-write after ``fork``, shared memory) count once per process,
  so the sum overstates the memory used by processes forked from a large parent.
- PSS (``Pss`` of ``smaps_rollup``): each shared page is divided among the processes that map it, so
  the sum is the memory the tree really uses. It is slower to read (milliseconds per large process),
  so it is read at checkpoints only.

On systems without ``/proc`` every function returns None.
"""

from __future__ import annotations

import os
import threading

__all__ = ["PeakRssSampler", "process_tree", "tree_pss_kib", "tree_rss_kib"]

_PROC = "/proc"


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="ascii", errors="replace") as f:
            return f.read()
    except OSError:  # the process is gone, or no /proc
        return None


def _children(pid: int) -> list[int] | None:
    """Direct children of ``pid`` from ``/proc/<pid>/task/<tid>/children`` (None if unsupported)."""
    try:
        tids = os.listdir(f"{_PROC}/{pid}/task")
    except OSError:
        return []
    children: list[int] = []
    for tid in tids:
        text = _read(f"{_PROC}/{pid}/task/{tid}/children")
        if text is None:
            if os.path.exists(f"{_PROC}/{pid}/task/{tid}"):
                return None  # kernel without CONFIG_PROC_CHILDREN
            continue
        children.extend(int(child) for child in text.split())
    return children


def _children_by_scan() -> dict[int, list[int]]:
    """Parent pid -> child pids, from every ``/proc/<pid>/stat``."""
    tree: dict[int, list[int]] = {}
    for name in os.listdir(_PROC):
        if not name.isdigit():
            continue
        stat = _read(f"{_PROC}/{name}/stat")
        if stat is None:
            continue
        # the command name (field 2) may contain spaces and parentheses: parse after the last ')'
        fields = stat[stat.rfind(")") + 2 :].split()
        if len(fields) > 1:
            tree.setdefault(int(fields[1]), []).append(int(name))
    return tree


def process_tree(pid: int | None = None) -> list[int] | None:
    """``pid`` (default: this process) and all its descendants, or None without ``/proc``.

    :param pid: the root process.
    :return: process ids, root first.
    """
    root = os.getpid() if pid is None else pid
    if not os.path.isdir(f"{_PROC}/{root}"):
        return None
    tree: list[int] = []
    todo = [root]
    scanned: dict[int, list[int]] | None = None
    while todo:
        current = todo.pop()
        tree.append(current)
        children = _children(current) if scanned is None else scanned.get(current, [])
        if children is None:
            scanned = _children_by_scan()
            children = scanned.get(current, [])
        todo.extend(children)
    return tree


def _status_kib(pid: int, key: str) -> int:
    text = _read(f"{_PROC}/{pid}/status")
    if text is None:
        return 0
    for line in text.splitlines():
        if line.startswith(key):
            return int(line.split()[1])
    return 0  # kernel threads, zombies


def tree_rss_kib(pid: int | None = None) -> int | None:
    """Sum of ``VmRSS`` over the process tree of ``pid`` (default: this process), in KiB."""
    pids = process_tree(pid)
    if pids is None:
        return None
    return sum(_status_kib(p, "VmRSS:") for p in pids)


def tree_pss_kib(pid: int | None = None) -> int | None:
    """Sum of ``Pss`` (``/proc/<pid>/smaps_rollup``) over the process tree, in KiB; None if unavailable."""
    pids = process_tree(pid)
    if pids is None:
        return None
    total = 0
    for p in pids:
        text = _read(f"{_PROC}/{p}/smaps_rollup")
        if text is None:
            if os.path.isdir(f"{_PROC}/{p}"):
                return None  # kernel older than 4.14
            continue
        for line in text.splitlines():
            if line.startswith("Pss:"):
                total += int(line.split()[1])
                break
    return total


class PeakRssSampler:
    """Tracks the peak of :func:`tree_rss_kib` for this process's tree, in a background thread.

    The thread samples every ``interval`` seconds while active; :meth:`pause` stops sampling (e.g. during
    a timed loop, so the sampler does not compete for the GIL or the CPU) and :meth:`sample` takes one
    reading at a checkpoint. Use as a context manager, or call :meth:`stop`.

    :param interval: seconds between samples while active.
    """

    def __init__(self, interval: float = 0.05) -> None:
        self.interval = interval
        self.peak_kib: int | None = None
        self._lock = threading.Lock()
        self._busy = threading.Lock()  # held during a background sample
        self._active = threading.Event()
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="vecenv-bench-rss", daemon=True)
        self._thread.start()
        self.resume()

    def _run(self) -> None:
        while not self._stopped.is_set():
            self._active.wait()
            with self._busy:
                if self._stopped.is_set() or not self._active.is_set():
                    continue
                self.sample()
            self._stopped.wait(self.interval)

    def sample(self) -> int | None:
        """Read the tree's RSS now, update the peak, and return the reading (KiB)."""
        value = tree_rss_kib()
        if value is not None:
            with self._lock:
                self.peak_kib = value if self.peak_kib is None else max(self.peak_kib, value)
        return value

    def pause(self) -> None:
        """Stop sampling in the background; returns after a sample in progress has finished."""
        self._active.clear()
        with self._busy:
            pass

    def resume(self) -> None:
        """Sample in the background again."""
        self._active.set()

    def stop(self) -> None:
        """End the background thread."""
        self._stopped.set()
        self._active.set()
        self._thread.join(timeout=5)

    def __enter__(self) -> PeakRssSampler:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()
