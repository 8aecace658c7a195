"""Error paths: bad env_fns, differing spaces, env exceptions, dead workers, SIGINT, and worker shutdown."""

from __future__ import annotations

import functools
import gc
import multiprocessing as mp
import os
import re
import signal

import numpy as np
import pytest

import vecenv
from tests.conftest import DEFAULT_START_METHOD, START_METHODS, build_venv
from tests.envs import CounterEnv, EnvFaultError, FaultEnv, NotAnEnv, ShapeEnv
from tests.processes import pid_running, run_python, still_running
from vecenv.errors import RemoteTraceback


def new_workers(before: set[int]) -> list[mp.process.BaseProcess]:
    """vecenv worker processes started since ``before`` that are still alive."""
    return [p for p in mp.active_children() if p.pid not in before and p.name.startswith("vecenv")]


def notes_of(exc: BaseException) -> list[str]:
    """The PEP 678 notes attached to ``exc``."""
    return list(getattr(exc, "__notes__", []))


# --- bad env_fns and differing spaces ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fns", "index", "kind"),
    [
        ([functools.partial(ShapeEnv, 2), functools.partial(ShapeEnv, 3)], 1, "observation"),
        ([functools.partial(ShapeEnv, 2)] * 2 + [functools.partial(ShapeEnv, 4)], 2, "observation"),
        ([functools.partial(ShapeEnv, 2, 2), functools.partial(ShapeEnv, 2, 5)], 1, "action"),
    ],
)
def test_spaces_differ(any_backend, fns, index, kind):
    """Sub-envs with different spaces: ValueError naming the env index and both spaces; no worker left."""
    first, odd = fns[0](), fns[index]()
    expected_space = getattr(first, f"{kind}_space")
    odd_space = getattr(odd, f"{kind}_space")
    before = {p.pid for p in mp.active_children()}
    with pytest.raises(ValueError, match=rf"\benv {index}\b") as info:
        build_venv(any_backend, fns)
    message = str(info.value)
    assert repr(odd_space) in message and repr(expected_space) in message
    assert new_workers(before) == []


def test_same_instance_rejected():
    """DummyVecEnv with two factories returning the same instance raises SB3's ValueError."""
    env = CounterEnv()
    with pytest.raises(ValueError, match=r"returned the same instance"):
        vecenv.DummyVecEnv([lambda: env, lambda: env])


@pytest.mark.parametrize("position", [0, 1])
def test_env_fn_not_callable(backend, position):
    """An env_fns entry that is not callable raises TypeError naming its index."""
    fns: list = [functools.partial(CounterEnv), functools.partial(CounterEnv)]
    fns[position] = CounterEnv()
    before = {p.pid for p in mp.active_children()}
    with pytest.raises(TypeError, match=rf"env_fns\[{position}\]"):
        build_venv(backend, fns)
    assert new_workers(before) == []


@pytest.mark.parametrize("bad", [NotAnEnv, lambda: "CartPole-v1", lambda: None])
def test_env_fn_returns_non_env(any_backend, bad):
    """A factory returning something that is not a gymnasium.Env raises TypeError naming its index."""
    before = {p.pid for p in mp.active_children()}
    with pytest.raises(TypeError, match=r"env_fns\[1\]"):
        build_venv(any_backend, [functools.partial(CounterEnv), bad])
    assert new_workers(before) == []


def test_invalid_start_method():
    """An unknown start method raises multiprocessing's ValueError."""
    with pytest.raises(ValueError, match=r"cannot find context for 'illegal_method'"):
        vecenv.SubprocVecEnv([CounterEnv], start_method="illegal_method")


# --- exceptions raised inside envs -------------------------------------------------------------------------

FAULTS = [
    ("step", "step"),
    ("reset", "reset"),
    ("method", "env_method"),
    ("attr", "get_attr"),
    ("init", "env construction"),
]


@pytest.mark.parametrize("builtin", [False, True], ids=["custom", "builtin"])
@pytest.mark.parametrize(("fail_in", "command"), FAULTS, ids=[f[0] for f in FAULTS])
def test_env_exception_reaches_caller(any_backend, make_venv, fail_in, command, builtin):
    """The env's own exception type and message reach the caller, with a note naming env 1 and the command."""
    after = 2 if fail_in == "step" else 1
    faulty = functools.partial(FaultEnv, fail_in=fail_in, after=after, builtin=builtin, offset=1)
    fns = [functools.partial(FaultEnv), faulty]
    exc_type = KeyError if builtin else EnvFaultError
    venv = None
    before = {p.pid for p in mp.active_children()}
    with pytest.raises(exc_type, match=rf"{'builtin' if builtin else 'custom'} fault in {fail_in}") as info:
        venv = make_venv(any_backend, fns)
        if fail_in != "reset":
            venv.reset()
        if fail_in == "step":
            venv.step(np.array([0, 0]))
            venv.step(np.array([0, 0]))
        elif fail_in == "reset":
            venv.reset()
        elif fail_in == "method":
            venv.env_method("explode", 5)
        elif fail_in == "attr":
            venv.get_attr("fragile")
    exc = info.value
    assert type(exc) is exc_type
    assert any(f"raised by env 1 during {command}" in note for note in notes_of(exc)), notes_of(exc)
    if not builtin:
        assert exc.where == fail_in  # the exception's own attributes survive
    if any_backend.startswith("subproc"):
        assert isinstance(exc.__cause__, RemoteTraceback)
        assert "Traceback" in exc.__cause__.tb and "_raise" in exc.__cause__.tb
        assert f"fault in {fail_in}" in exc.__cause__.tb
        # a note points at the remote side: the worker process and its envs
        assert any("worker process" in note and "envs [1]" in note for note in notes_of(exc)), notes_of(exc)
    if fail_in == "init":
        assert new_workers(before) == []
        return
    # the other env, and the failing env itself, still answer; the venv can reset and step
    assert venv.get_attr("offset") == [0, 1]
    assert venv.env_method("explode", 3, indices=0) == [3]
    obs = venv.reset()
    np.testing.assert_array_equal(obs[:, :3], [[0, obs[0, 1], 0], [1, obs[1, 1], 0]])
    obs, _, _, _ = venv.step(np.array([0, 0]))
    np.testing.assert_array_equal(obs[:, 2], [1, 1])


@pytest.mark.parametrize("bad_index", [0, 2])
def test_exception_names_global_env_index(backend, make_venv, bad_index):
    """The note names the global index of the failing env (here among 3 envs)."""
    fns = [functools.partial(FaultEnv, offset=i) for i in range(3)]
    fns[bad_index] = functools.partial(FaultEnv, fail_in="step", after=1, offset=bad_index)
    venv = make_venv(backend, fns)
    venv.reset()
    with pytest.raises(EnvFaultError, match=rf"raised by env {bad_index} during step"):
        venv.step(np.array([0, 0, 0]))
    assert venv.get_attr("offset") == [0, 1, 2]


def test_has_attr_after_exception(backend, make_venv):
    """has_attr / get_attr still answer for every env after an env raised in step."""
    fns = [functools.partial(FaultEnv), functools.partial(FaultEnv, fail_in="step", after=1, offset=1)]
    venv = make_venv(backend, fns)
    venv.reset()
    with pytest.raises(EnvFaultError):
        venv.step(np.array([0, 0]))
    assert venv.has_attr("offset") is True
    assert venv.has_attr("missing") is False
    assert venv.get_attr("t") == [1, 0]  # env 0 stepped; env 1 raised before counting


# --- worker processes: death, SIGINT, close ---------------------------------------------------------------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("start_method", START_METHODS)
def test_killed_worker_raises(start_method, make_venv):
    """A worker killed with SIGKILL: the next step raises WorkerDiedError naming its envs; close() returns."""
    venv = make_venv(f"subproc-{start_method}", [functools.partial(CounterEnv, offset=i) for i in range(2)])
    venv.reset()
    os.kill(venv.processes[0].pid, signal.SIGKILL)
    with pytest.raises(vecenv.WorkerDiedError, match=r"envs \[0\]"):
        venv.step(np.array([0, 0]))
    with pytest.raises(vecenv.WorkerDiedError, match=r"envs \[0\]"):
        venv.step(np.array([0, 0]))  # still dead: an error again, not a hang
    venv.close()


@pytest.mark.timeout(60)
@pytest.mark.parametrize("start_method", START_METHODS)
def test_worker_killed_while_parent_waits(start_method, make_venv):
    """SIGKILL on a worker busy in step while the parent waits in step_wait: WorkerDiedError, never a hang."""
    fns = [functools.partial(FaultEnv), functools.partial(FaultEnv, fail_in="hang", after=1, offset=1)]
    venv = make_venv(f"subproc-{start_method}", fns)
    venv.reset()
    venv.step_async(np.array([0, 0]))
    os.kill(venv.processes[1].pid, signal.SIGKILL)
    with pytest.raises(vecenv.WorkerDiedError, match=r"envs \[1\]") as info:
        venv.step_wait()
    assert "SIGKILL" in str(info.value)
    venv.close()


@pytest.mark.timeout(90)
def test_close_with_hung_worker(make_venv, monkeypatch):
    """close() while a worker is stuck inside env.step returns (bounded) and ends that worker."""
    # a short close deadline before the hung worker is terminated (the default, 5 s, is waited for by the hang case
    # of test_faults.py::test_program_shutdown)
    monkeypatch.setattr(vecenv.workers.base, "CLOSE_TIMEOUT", 0.5)
    fns = [functools.partial(FaultEnv), functools.partial(FaultEnv, fail_in="hang", after=1, offset=1)]
    venv = make_venv("subproc", fns)
    venv.reset()
    pids = [p.pid for p in venv.processes]
    venv.step_async(np.array([0, 0]))
    venv.close()
    assert still_running(pids) == []


@pytest.mark.timeout(60)
def test_worker_exit_raises(make_venv):
    """A worker that exits (os._exit(3) inside step) raises WorkerDiedError with the exit code."""
    fns = [functools.partial(FaultEnv), functools.partial(FaultEnv, fail_in="exit", after=1, offset=1)]
    venv = make_venv("subproc", fns)
    venv.reset()
    with pytest.raises(vecenv.WorkerDiedError, match=r"envs \[1\].*exited with code 3"):
        venv.step(np.array([0, 0]))
    venv.close()


@pytest.mark.timeout(60)
def test_worker_exit_where_the_program_ignores_sigchld():
    """A program that ignores SIGCHLD (services often do): the kernel collects the worker's exit status, so its
    exit code is unknown; the error says that the worker ended and why its code is unknown, not that it hangs."""
    fns = [functools.partial(FaultEnv), functools.partial(FaultEnv, fail_in="exit", after=1, offset=1)]
    previous = signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    try:
        venv = vecenv.SubprocVecEnv(fns, start_method="fork")  # (the workers are this process's children)
        try:
            venv.reset()
            with pytest.raises(vecenv.WorkerDiedError, match=r"envs \[1\] ended \(.*ignores SIGCHLD") as info:
                venv.step(np.array([0, 0]))
            assert "unresponsive" not in str(info.value)
        finally:
            venv.close()
    finally:
        signal.signal(signal.SIGCHLD, previous)


def _notes_of_a_subproc_vec_env_built_here() -> list[str] | None:
    """In a pool worker: the notes on the error of building a SubprocVecEnv (None: it was built)."""
    try:
        vecenv.SubprocVecEnv([CounterEnv, CounterEnv], start_method="fork").close()
    except AssertionError as exc:
        return list(getattr(exc, "__notes__", []))
    return None


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_subproc_vec_env_in_a_daemonic_process_says_what_to_do():
    """In a daemonic process (a multiprocessing.Pool worker, a DataLoader worker), which cannot have children:
    multiprocessing's AssertionError, with a note saying why and what to use instead."""
    with mp.get_context("fork").Pool(1) as pool:
        notes = pool.apply(_notes_of_a_subproc_vec_env_built_here)
    assert notes is not None and any("daemonic" in note and "DummyVecEnv" in note for note in notes), notes


@pytest.mark.timeout(60)
def test_workers_ignore_sigint(make_venv):
    """SIGINT sent to the workers does not end them: the venv keeps stepping and answering."""
    venv = make_venv("subproc", [functools.partial(CounterEnv, offset=i, episode_len=10) for i in range(2)])
    venv.reset()
    for process in venv.processes:
        os.kill(process.pid, signal.SIGINT)
    for t in range(1, 4):
        obs, _, _, _ = venv.step(np.array([0, 0]))
        np.testing.assert_array_equal(obs[:, 2], [t, t])
    assert venv.get_attr("t") == [3, 3]
    assert all(pid_running(p.pid) for p in venv.processes)


@pytest.mark.parametrize("start_method", START_METHODS)
def test_close_ends_worker_processes(start_method):
    """close() ends every worker process, and a second close() is a no-op."""
    venv = vecenv.SubprocVecEnv([functools.partial(CounterEnv, offset=i) for i in range(2)], start_method=start_method)
    venv.reset()
    pids = [p.pid for p in venv.processes]
    assert all(pid_running(pid) for pid in pids)
    venv.close()
    venv.close()
    assert still_running(pids) == []


def test_processes_report_exit_after_close():
    """After close(), venv.processes are joined: is_alive() is False and exitcode is set (as SB3)."""
    venv = vecenv.SubprocVecEnv([functools.partial(CounterEnv, offset=i) for i in range(2)])
    venv.reset()
    processes = list(venv.processes)
    venv.close()
    for process in venv.processes:
        assert not process.is_alive()
        assert process.exitcode is not None
    assert processes == list(venv.processes)


@pytest.mark.parametrize("pending", [False, True], ids=["idle", "pending-step"])
def test_garbage_collection_ends_workers(pending):
    """Dropping the last reference to an unclosed SubprocVecEnv ends its workers."""
    venv = vecenv.SubprocVecEnv([functools.partial(CounterEnv, offset=i) for i in range(2)])
    venv.reset()
    if pending:
        venv.step_async(np.array([0, 0]))
    pids = [p.pid for p in venv.processes]
    assert all(pid_running(pid) for pid in pids)
    del venv
    gc.collect()
    assert still_running(pids) == []


EXIT_SCRIPT = """
import functools, sys
from vecenv import SubprocVecEnv
from tests.envs import CounterEnv

if __name__ == "__main__":
    venv = SubprocVecEnv([functools.partial(CounterEnv, offset=i) for i in range(2)], start_method=sys.argv[1])
    venv.reset()
    if sys.argv[2] == "pending":
        venv.step_async([0, 0])
    print(" ".join(str(p.pid) for p in venv.processes), flush=True)
"""


@pytest.mark.parametrize(
    ("start_method", "mode"), [*((m, "idle") for m in START_METHODS), (DEFAULT_START_METHOD, "pending")]
)
def test_interpreter_exit_ends_workers(start_method, mode):
    """A script that exits without close() terminates cleanly and leaves no worker process behind."""
    result = run_python("-c", EXIT_SCRIPT, start_method, mode, timeout=120)
    assert result.returncode == 0, result.stderr
    pids = [int(pid) for pid in result.stdout.split()]
    assert len(pids) == 2
    assert still_running(pids) == []
    assert "Traceback" not in result.stderr, result.stderr


SIGPIPE_SCRIPT = """
import functools, os, signal, sys, time
import numpy as np
import vecenv
import vecenv.gymnasium
from tests.envs import CounterEnv

if __name__ == "__main__":
    signal.signal(signal.SIGPIPE, signal.SIG_DFL)  # (a program that ends quietly when its output is closed)
    fns = [functools.partial(CounterEnv, offset=i) for i in range(2)]
    for name in ("SubprocVecEnv", "AsyncVectorEnv"):
        if name == "SubprocVecEnv":
            venv = vecenv.SubprocVecEnv(fns, start_method="fork")
            venv.reset()
            processes, step = venv.processes, lambda: venv.step(np.zeros(2, dtype=np.int64))
        else:
            venv = vecenv.gymnasium.AsyncVectorEnv(fns, context="fork")
            venv.reset()
            processes, step = venv.processes, lambda: venv.step(np.zeros(2, dtype=np.int64))
        os.kill(processes[1].pid, signal.SIGKILL)
        processes[1].join(10)
        try:
            step()
        except vecenv.WorkerDiedError as exc:
            print(name, "WorkerDiedError", "SIGKILL" in str(exc), flush=True)
        venv.close()
        # (a second close, and one more step, write nothing into the dead worker's pipe either)
        venv.close()
    from multiprocessing import reduction
    import vecenv.workers.subproc as subproc
    real = reduction.send_handle

    def dying_first(conn, handle, pid):  # (the worker ends as it is handed the shared block)
        os.kill(pid, signal.SIGKILL)
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        return real(conn, handle, pid)

    subproc.reduction.send_handle = dying_first
    try:
        vecenv.SubprocVecEnv(fns, start_method="fork")
    except vecenv.WorkerDiedError as exc:
        print("setup WorkerDiedError", "SIGKILL" in str(exc), flush=True)
    print("END", flush=True)
"""


@pytest.mark.timeout(120)
def test_a_dead_worker_with_sigpipe_at_its_default_action_is_reported():
    """A program that restores SIGPIPE's default action (``| head`` pipelines): a request written to a dead
    worker's pipe would end it silently with SIGPIPE; vecenv raises WorkerDiedError naming the cause instead."""
    result = run_python("-c", SIGPIPE_SCRIPT, timeout=100)
    assert result.returncode == 0, (result.returncode, result.stderr[-2000:])
    assert result.stdout.split("\n")[:4] == [
        "SubprocVecEnv WorkerDiedError True",
        "AsyncVectorEnv WorkerDiedError True",
        "setup WorkerDiedError True",
        "END",
    ], result.stdout


@pytest.mark.timeout(60)
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_too_few_file_descriptors_for_the_workers_says_what_fits():
    """Under a low RLIMIT_NOFILE (``ulimit -n``), starting many workers runs out of descriptors: the OSError says
    how many the limit allows, how many each worker takes, and what to change; nothing is left behind."""
    import resource

    gc.collect()
    before = {p.pid for p in mp.active_children()}
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    open_now = len(os.listdir("/proc/self/fd"))
    resource.setrlimit(resource.RLIMIT_NOFILE, (open_now + 24, hard))
    try:
        with pytest.raises(OSError, match="Too many open files") as info:
            vecenv.SubprocVecEnv([CounterEnv] * 16, n_workers=16, start_method="fork")
        note = " ".join(getattr(info.value, "__notes__", []))
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
    assert f"may have {open_now + 24} file descriptors open (RLIMIT_NOFILE)" in note
    assert re.search(r"and \d+ of the 16 workers were started\. Use fewer workers \(n_workers=\d+", note), note
    del info
    gc.collect()
    # (CPython's own fork launcher leaks its first pipe pair where its second os.pipe() is the one refused)
    assert len(os.listdir("/proc/self/fd")) <= open_now + 2 and not new_workers(before)


def test_remote_traceback_str():
    """RemoteTraceback keeps the traceback text and prints it."""
    tb = 'Traceback (most recent call last):\n  File "x.py", line 1\nValueError: boom\n'
    remote = RemoteTraceback(tb)
    assert remote.tb == tb
    assert re.search(r"ValueError: boom", str(remote))
