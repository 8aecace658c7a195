"""Did a code change move the hot path? Two source trees of vecenv in paired, interleaved rounds.

The baseline is a git revision's ``vecenv/`` package (``git archive REV vecenv | tar -x`` into a temporary
directory), the candidate the working tree. Each runs in its own long-lived Python process whose
``sys.path[0]`` is its tree (checked: ``vecenv.__file__`` must be under it, in the process and in every env
factory call, SubprocVecEnv's workers included), on the same workloads (the trees' own
``vecenv.bench.workloads``; the CPU workload's iterations calibrated once, here, and passed to both) and the
same seeded actions. For each case, ``--rounds`` rounds run the same measured chunk (``--seconds``, sized
from a warm-up) in every process, the order reversed every other round; the statistic of a round is the
candidate's rate over the baseline's (``subproc-*``: SubprocVecEnv, default ``n_workers``) or the
candidate's overhead minus the baseline's (``dummy-*``: DummyVecEnv's time minus a plain loop's over the
same number of env copies, in the same process and round, in microseconds per env-step; ``collect-*``: the
calling process's ``step_wait`` of a SubprocVecEnv step timed alone, after a sleep long enough for every worker
to reply, in microseconds per env-step: its collection when the last reply is in, which on many cores is
what a step adds after its slowest worker; ``send-*``: the calling process's CPU time in ``step_async``, every
worker idle, in microseconds per env-step: writing the requests, which wakes the workers, is work of its own that
wall time cannot tell from the workers' on few cores). The table gives the median and quartiles over rounds.

The same protocol run with the candidate against a second process of itself (A/A) measures the noise:
by default both run, in the same rounds (baseline, candidate, candidate' and back), and the table puts
them side by side, so one run answers whether the change is outside the A/A noise.

    python benchmarks/revision_ab.py                                     # fdf003c vs working tree, A/B + A/A
    python benchmarks/revision_ab.py --baseline HEAD --output benchmarks/results/revision-ab.md
    python benchmarks/revision_ab.py --cases dummy-cartpole-64,subproc-cpu-16 --rounds 15
    python benchmarks/revision_ab.py --aa                                # A/A only: the noise band
    python benchmarks/revision_ab.py --rounds 2 --seconds 0.2 --warmup 0.1   # smoke test
    python benchmarks/revision_ab.py --subproc-kwargs '{"n_workers": 1}' --candidate-kwargs '{"wait_mode": "block"}'
    python benchmarks/revision_ab.py --cases subproc-cartpole-64 --trainer-us 500   # a trainer's work between steps
    python benchmarks/revision_ab.py --cases collect-pong-64 --subproc-kwargs '{"n_workers": 16}'   # 16 replies
    python benchmarks/revision_ab.py --cases send-pong-64 --subproc-kwargs '{"n_workers": 16}'   # 16 requests
"""

from __future__ import annotations

import argparse
import datetime
import functools
import gc
import json
import os
import platform
import select
import signal
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

# Nothing of vecenv (nor pandas, tqdm) is imported at the top: this module is also imported by the child
# processes, with their own tree first on sys.path, and by SubprocVecEnv's workers (CheckedFactory).

REPO = Path(__file__).resolve().parents[1]
BENCH_DIR = Path(__file__).resolve().parent
ACTION_POOL = 64  # seeded action batches, cycled
BASELINE, CANDIDATE, CANDIDATE2 = "baseline", "candidate", "candidate'"


@dataclass(frozen=True)
class Case:
    """``kind`` ``dummy`` (DummyVecEnv overhead over a plain loop), ``subproc`` (SubprocVecEnv rate),
    ``collect`` (SubprocVecEnv's ``step_wait`` alone, once every worker has replied) or ``send`` (the CPU time of
    SubprocVecEnv's ``step_async`` alone, every worker idle). ``num_envs`` env copies; the ``pettingzoo`` workload's
    rows (agents) are the vector env's envs, and its figures are per agent-step."""

    kind: str
    workload: str
    num_envs: int

    @property
    def rows(self) -> int:
        """The vector env's ``num_envs``: one per agent of each env copy for ``pettingzoo``."""
        return self.num_envs * PETTINGZOO_AGENTS if self.workload == "pettingzoo" else self.num_envs


CASES = {
    "dummy-cartpole-2": Case("dummy", "cartpole", 2),  # a fixed cost per step call shows most here
    "dummy-cartpole-16": Case("dummy", "cartpole", 16),
    "dummy-cartpole-64": Case("dummy", "cartpole", 64),
    "dummy-image-16": Case("dummy", "image", 16),
    "subproc-cartpole-8": Case("subproc", "cartpole", 8),  # a small batch: the wake-ups are most of a step
    "subproc-cartpole-64": Case("subproc", "cartpole", 64),
    "subproc-image-16": Case("subproc", "image", 16),
    "subproc-cpu-16": Case("subproc", "cpu", 16),
    "subproc-cpu-4": Case("subproc", "cpu", 4),  # 2 envs per default worker: waits under 1 ms, CPU-bound workers
    # the 16-core workloads (default n_workers: one process per core)
    "subproc-cartpole-1024": Case("subproc", "cartpole", 1024),
    "subproc-image-128": Case("subproc", "image", 128),
    "subproc-cpu-128": Case("subproc", "cpu", 128),
    "subproc-pong-8": Case("subproc", "pong", 8),
    "subproc-pong-64": Case("subproc", "pong", 64),
    # the calling process's collection of a step whose replies are all in (the last worker's reply on many cores)
    "collect-cartpole-1024": Case("collect", "cartpole", 1024),
    "collect-image-128": Case("collect", "image", 128),
    "collect-pong-64": Case("collect", "pong", 64),
    # the calling process's requests of a step, the workers idle (its CPU time: wall time counts the workers it
    # wakes on few cores)
    "send-cartpole-1024": Case("send", "cartpole", 1024),
    "send-pong-64": Case("send", "pong", 64),
    # PettingZoo (needs mpe2): N copies of simple_spread_v3 as vecenv.pettingzoo.make_vec_env's rows (3 per env)
    "subproc-pettingzoo-64": Case("subproc", "pettingzoo", 64),
    "collect-pettingzoo-64": Case("collect", "pettingzoo", 64),
    "send-pettingzoo-64": Case("send", "pettingzoo", 64),
}
#: ALE Pong (210x160x3 uint8 observations; needs ale-py): ``gymnasium.make`` imports ale_py first, in workers too
PONG_ID = "ale_py:ALE/Pong-v5"


#: mpe2's ``simple_spread_v3`` as pettingzoo_bench.py steps it (3 agents, discrete actions)
PETTINGZOO_KWARGS = {"max_cycles": 25, "continuous_actions": False}
PETTINGZOO_AGENTS = 3


def pettingzoo_env_fn() -> Any:
    """``simple_spread_v3.parallel_env`` with :data:`PETTINGZOO_KWARGS` (a picklable callable)."""
    from mpe2 import simple_spread_v3

    return functools.partial(simple_spread_v3.parallel_env, **PETTINGZOO_KWARGS)


def workload_factory(workload: str, cpu_iterations: int | None) -> Any:
    """The env factory of ``workload``, from the importing tree's ``vecenv.bench.workloads`` (``pong``: ALE Pong;
    ``pettingzoo``: one copy of the PettingZoo env as ``vecenv.pettingzoo`` stacks its agents)."""
    from vecenv.bench.workloads import WORKLOADS, WorkloadFactory

    if workload == "pong":
        return WorkloadFactory(PONG_ID)
    if workload == "pettingzoo":
        from vecenv.pettingzoo import AgentStackEnv

        env_fn = pettingzoo_env_fn()
        return lambda: AgentStackEnv(env_fn())  # (this process's only: the contender builds the rows itself)
    return WORKLOADS[workload].factory(cpu_iterations)


# ---------------------------------------------------------------------------------------------- child side


def check_tree(tree: str) -> str:
    """``vecenv.__file__`` of this process; raises if it is not under ``tree``/vecenv."""
    import vecenv

    path = Path(vecenv.__file__).resolve()
    expected = Path(tree).resolve() / "vecenv"
    if not path.is_relative_to(expected):
        raise RuntimeError(f"pid {os.getpid()} imported vecenv from {path}, expected it under {expected}")
    return str(path)


@dataclass(frozen=True)
class CheckedFactory:
    """An env factory that first checks which vecenv the calling process imported (workers included)."""

    tree: str
    inner: Any

    def __call__(self) -> Any:
        check_tree(self.tree)
        return self.inner()


class Contender:
    """The vector env (and for ``dummy``, the plain loop's envs) of one case, in a child process."""

    def __init__(self, tree: str, request: dict[str, Any]) -> None:
        from vecenv import DummyVecEnv, SubprocVecEnv
        from vecenv.bench.workloads import register_envs

        register_envs()
        self.kind, n = request["kind"], request["num_envs"]
        #: seconds of the calling process's own CPU work between two vector steps (a trainer's), subproc only
        self.trainer = request.get("trainer_us", 0.0) * 1e-6
        factory = CheckedFactory(tree, workload_factory(request["workload"], request["cpu_iterations"]))
        self.batches = [np.asarray(batch, dtype=request["dtype"]) for batch in request["actions"]]
        self.per_env = [list(batch) for batch in self.batches]  # the elements a vector env passes on
        self.envs: list[Any] = []
        if request["workload"] == "pettingzoo":  # the rows of n env copies (no plain loop: not a dummy case)
            from vecenv.pettingzoo import make_vec_env

            env_fn = CheckedFactory(tree, pettingzoo_env_fn())
            self.venv = make_vec_env(
                env_fn, n, vec_env_cls=SubprocVecEnv, vec_env_kwargs=request.get("subproc_kwargs", {})
            )
        elif self.kind == "dummy":
            self.envs = [factory() for _ in range(n)]
            for i, env in enumerate(self.envs):
                env.reset(seed=i)
            self.venv = DummyVecEnv([factory] * n)
        else:
            self.venv = SubprocVecEnv([factory] * n, **request.get("subproc_kwargs", {}))
        #: ``collect``: seconds to let the workers reply before ``step_wait`` is timed (set by :meth:`warmup`)
        self.settle = 0.0
        self.venv.seed(0)
        self.venv.reset()

    def plain(self, start: int, stop: int) -> float:
        """Seconds of the plain loop over action batches ``start..stop-1`` (cycled)."""
        envs, pool = self.envs, self.per_env
        begin = time.perf_counter()
        for i in range(start, stop):
            for env, action in zip(envs, pool[i % ACTION_POOL], strict=True):
                _obs, _reward, terminated, truncated, _info = env.step(action)
                if terminated or truncated:
                    env.reset()
        return time.perf_counter() - begin

    def vec(self, start: int, stop: int) -> float:
        """Seconds of ``venv.step`` over action batches ``start..stop-1`` (cycled)."""
        step, pool, trainer, clock = self.venv.step, self.batches, self.trainer, time.perf_counter
        begin = clock()
        for i in range(start, stop):
            step(pool[i % ACTION_POOL])
            if trainer:
                until = clock() + trainer
                while clock() < until:  # the trainer's compute: this core is busy, as with a policy update
                    pass
        return clock() - begin

    def collect(self, start: int, stop: int) -> float:
        """Seconds of ``step_wait`` alone over action batches ``start..stop-1`` (cycled): each ``step_async`` is
        followed by a sleep of :attr:`settle` (every worker's reply is in by then), then ``step_wait`` is timed."""
        step_async, step_wait, pool, clock = self.venv.step_async, self.venv.step_wait, self.batches, time.perf_counter
        total = 0.0
        for i in range(start, stop):
            step_async(pool[i % ACTION_POOL])
            time.sleep(self.settle)
            begin = clock()
            step_wait()
            total += clock() - begin
        return total

    def send(self, start: int, stop: int) -> float:
        """CPU seconds of ``step_async`` alone over action batches ``start..stop-1`` (cycled), timed as
        :meth:`collect` times ``step_wait`` (every worker idle when the requests are written)."""
        step_async, step_wait, pool, clock = self.venv.step_async, self.venv.step_wait, self.batches, time.thread_time
        total = 0.0
        for i in range(start, stop):
            begin = clock()
            step_async(pool[i % ACTION_POOL])
            total += clock() - begin
            time.sleep(self.settle)
            step_wait()
        return total

    def warmup(self, seconds: float) -> float:
        """Step for about ``seconds``; the chunks (plain + vec for ``dummy``) per second. ``collect``, ``send``:
        then sets :attr:`settle` to 3 steps' time plus 1 ms, and returns how many timed steps fit in a second."""
        done, begin = 0, time.perf_counter()
        while time.perf_counter() - begin < seconds:
            if self.kind == "dummy":
                self.plain(done, done + 10)
            self.vec(done, done + 10)
            done += 10
        per_second = done / (time.perf_counter() - begin)
        if self.kind in ("collect", "send"):
            self.settle = 3.0 / per_second + 0.001
            return 1.0 / (self.settle + 1.0 / per_second)
        return per_second

    def measure(self, steps: int) -> dict[str, float]:
        """One round's chunk of ``steps`` vector steps: ``dummy`` as plain, vec, vec, plain halves (ABBA)."""
        gc.collect()
        if self.kind == "collect":
            return {"vec": self.collect(0, steps)}
        if self.kind == "send":
            return {"vec": self.send(0, steps)}
        if self.kind != "dummy":
            return {"vec": self.vec(0, steps)}
        half = steps // 2
        plain = self.plain(0, half)
        vec = self.vec(0, half) + self.vec(half, steps)
        plain += self.plain(half, steps)
        return {"vec": vec, "plain": plain}

    def close(self) -> None:
        self.venv.close()
        for env in self.envs:
            env.close()


def child_main(tree: str) -> None:
    """Serve the parent's requests, one JSON line each way, until ``exit`` or the end of stdin."""
    protocol = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)  # stray output (ours, gymnasium's, the workers') goes to stderr, not into the protocol

    def send(reply: dict[str, Any]) -> None:
        protocol.write(json.dumps(reply) + "\n")

    try:
        import vecenv

        send({"vecenv": check_tree(tree), "version": getattr(vecenv, "__version__", "?"), "pid": os.getpid()})
    except Exception:
        send({"error": traceback.format_exc()})
        sys.exit(1)
    contender: Contender | None = None
    try:
        for line in sys.stdin:
            request = json.loads(line)
            op = request["op"]
            try:
                if op == "setup":
                    contender = Contender(tree, request)
                    send({})
                elif op == "warmup" and contender is not None:
                    send({"rate": contender.warmup(request["seconds"])})
                elif op == "measure" and contender is not None:
                    send(contender.measure(request["steps"]))
                elif op == "teardown" and contender is not None:
                    contender, closing = None, contender
                    closing.close()
                    send({})
                elif op == "calibrate":
                    from vecenv.bench.workloads import calibrate_cpu_iterations

                    send({"iterations": calibrate_cpu_iterations()})
                elif op == "exit":
                    break
                else:
                    send({"error": f"unexpected request {op!r} (case set up: {contender is not None})"})
            except Exception:
                send({"error": traceback.format_exc()})
    finally:
        if contender is not None:
            contender.close()
        send({})


# --------------------------------------------------------------------------------------------- parent side


class Child:
    """One contender's process: ``python -c`` with ``sys.path[0]`` = its tree, driven over stdin/stdout."""

    def __init__(self, label: str, tree: Path, timeout: float) -> None:
        self.label, self.tree, self.timeout = label, tree, timeout
        code = (
            f"import sys; sys.path[:] = [{str(tree)!r}, {str(BENCH_DIR)!r}] + "
            f"[p for p in sys.path if p not in ('', {str(tree)!r}, {str(BENCH_DIR)!r})]; "
            f"import revision_ab; revision_ab.child_main({str(tree)!r})"
        )
        env = dict(os.environ)
        # belt and braces for the workers (multiprocessing passes sys.path on anyway); checked by CheckedFactory
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(tree), str(BENCH_DIR), env.get("PYTHONPATH")) if p)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", code],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=tree,
            env=env,
            start_new_session=True,  # its own process group: Ctrl-C reaches the parent only, which stops it
        )
        self._buffer = b""
        self.hello: dict[str, Any] = {}

    def __str__(self) -> str:
        return f"{self.label} (pid {self.proc.pid}, tree {self.tree})"

    def _read(self, timeout: float) -> dict[str, Any]:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"{self}: no reply within {timeout:g} s")
            if select.select([fd], [], [], remaining)[0]:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"{self} exited (status {self.proc.wait()}); its stderr is above")
                self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        reply = json.loads(line)
        if "error" in reply:
            raise RuntimeError(f"{self} failed:\n{reply['error']}")
        return reply

    def started(self) -> dict[str, Any]:
        """Wait for the child's greeting: where it imported vecenv from (it checked the tree itself)."""
        self.hello = self._read(self.timeout)
        return self.hello

    def request(self, op: str, **fields: Any) -> dict[str, Any]:
        assert self.proc.stdin is not None
        self.proc.stdin.write((json.dumps({"op": op, **fields}) + "\n").encode())
        self.proc.stdin.flush()
        return self._read(self.timeout)

    def stop(self) -> None:
        """Ask the child to close its envs and exit; wait for it; kill its own process group if it hangs."""
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write(b'{"op": "exit"}\n')
                self.proc.stdin.close()  # end of stdin also ends the child's loop
            except OSError:
                pass
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # start_new_session: its group id is its pid
                self.proc.wait()
        if self.proc.stdout is not None:
            self.proc.stdout.close()


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True).stdout.strip()


def extract(rev: str, destination: Path) -> str:
    """``git archive REV vecenv | tar -x -C destination``; the revision's short hash."""
    try:
        short = git("rev-parse", "--short", f"{rev}^{{commit}}")
    except subprocess.CalledProcessError as error:
        raise SystemExit(f"error: {rev!r} is not a revision of {REPO}: {error.stderr.strip()}") from error
    probe = ["git", "-C", str(REPO), "cat-file", "-e", f"{rev}:vecenv/bench/workloads.py"]
    if subprocess.run(probe, capture_output=True, check=False).returncode:
        raise SystemExit(
            f"error: {rev} has no vecenv/bench/workloads.py; both trees need its WORKLOADS and register_envs"
        )
    destination.mkdir(parents=True)
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", rev, "vecenv"], stdout=subprocess.PIPE)
    tar = subprocess.run(["tar", "-x", "-C", str(destination)], stdin=archive.stdout, check=False)
    assert archive.stdout is not None
    archive.stdout.close()
    if archive.wait() or tar.returncode:
        raise SystemExit(f"error: git archive {rev} vecenv | tar -x failed ({archive.returncode}, {tar.returncode})")
    return short


def seeded_actions(case: Case, cpu_iterations: int | None) -> tuple[list[Any], str]:
    """``ACTION_POOL`` batches of ``num_envs`` actions from the workload's action space seeded with 0."""
    env = workload_factory(case.workload, cpu_iterations)()
    space = env.agent_action_space if case.workload == "pettingzoo" else env.action_space  # (pettingzoo: per row)
    env.close()
    space.seed(0)
    batches = [np.stack([space.sample() for _ in range(case.rows)]) for _ in range(ACTION_POOL)]
    return [batch.tolist() for batch in batches], str(batches[0].dtype)


def run_case(
    case: Case, children: dict[str, Child], args: argparse.Namespace, cpu_iterations: int | None, progress: Any
) -> dict[str, Any]:
    """Rounds of one case; every contender's per-round value (env-steps/s, or overhead us/env-step)."""
    actions, dtype = seeded_actions(case, cpu_iterations)
    setup = {"kind": case.kind, "workload": case.workload, "num_envs": case.num_envs}
    setup |= {"cpu_iterations": cpu_iterations, "actions": actions, "dtype": dtype}
    # on an error the children are stopped (main's finally), and a stopping child closes its envs
    for label, child in children.items():
        kwargs = args.subproc_kwargs | (args.candidate_kwargs if label != BASELINE else {})
        subproc = case.kind in ("subproc", "collect", "send")
        child.request(
            "setup",
            **setup,
            subproc_kwargs=kwargs if subproc else {},
            trainer_us=args.trainer_us * (case.kind == "subproc"),
        )
    warm = [child.request("warmup", seconds=args.warmup)["rate"] for child in children.values()]
    steps = max(2, round(args.seconds * float(np.mean(warm))))
    values: dict[str, list[float]] = {label: [] for label in children}
    plain: list[float] = []
    order = list(children)  # baseline, candidate, candidate': each pair adjacent, its order reversed each round
    env_steps = steps * case.rows
    for r in range(args.rounds):
        for label in order if r % 2 == 0 else order[::-1]:
            reply = children[label].request("measure", steps=steps)
            if case.kind == "dummy":
                values[label].append((reply["vec"] - reply["plain"]) / env_steps * 1e6)
                plain.append(reply["plain"] / env_steps * 1e6)
            elif case.kind in ("collect", "send"):
                values[label].append(reply["vec"] / env_steps * 1e6)
            else:
                values[label].append(env_steps / reply["vec"])
        progress.update()
    for child in children.values():
        child.request("teardown")
    return {"values": values, "plain": plain, "steps": steps}


def summary(values: np.ndarray) -> tuple[float, float, float]:
    return float(np.median(values)), float(np.percentile(values, 25)), float(np.percentile(values, 75))


def verdict(ab: tuple[float, float, float] | None, aa: tuple[float, float, float] | None, ratio: bool) -> str:
    """A/B's quartile range entirely above or below A/A's: moved; otherwise within the A/A noise."""
    if ab is None or aa is None:
        return "n/a (A/B and A/A both needed)"
    if ab[1] > aa[2]:
        return "faster" if ratio else "slower (more overhead)"
    if ab[2] < aa[1]:
        return "slower" if ratio else "faster (less overhead)"
    return "within A/A noise"


def table_row(name: str, case: Case, result: dict[str, Any]) -> dict[str, str]:
    values = {label: np.array(v) for label, v in result["values"].items()}
    ratio = case.kind == "subproc"

    def stat(numerator: str, denominator: str) -> tuple[float, float, float] | None:
        if numerator not in values or denominator not in values:
            return None
        a, b = values[numerator], values[denominator]
        return summary(a / b if ratio else a - b)

    def value(label: str) -> str:
        if label not in values:
            return "-"
        median = float(np.median(values[label]))
        return f"{median:,.0f}" if ratio else f"{median:.3f}"

    def cells(s: tuple[float, float, float] | None) -> tuple[str, str]:
        if s is None:
            return "-", "-"
        if ratio:
            return f"{s[0]:.3f}", f"{s[1]:.3f}..{s[2]:.3f}"
        return f"{s[0]:+.3f}", f"{s[1]:+.3f}..{s[2]:+.3f}"

    ab, aa = stat(CANDIDATE, BASELINE), stat(CANDIDATE2, CANDIDATE)
    (ab_median, ab_range), (aa_median, aa_range) = cells(ab), cells(aa)
    return {
        "case": name,
        "statistic": "env-steps/s, cand / base"
        if ratio
        else f"{case.kind} us/env-step, cand - base"
        if case.kind in ("collect", "send")
        else "overhead us/env-step, cand - base",
        "plain us/env-step": f"{np.median(result['plain']):.3f}" if result["plain"] else "",
        "baseline": value(BASELINE),
        "candidate": value(CANDIDATE),
        "A/B median": ab_median,
        "A/B p25..p75": ab_range,
        "A/A median": aa_median,
        "A/A p25..p75": aa_range,
        "verdict": verdict(ab, aa, ratio),
    }


def render(frame: Any) -> str:
    """The Markdown table: vecenv's own helper if the working tree has it, else pandas (needs tabulate)."""
    try:
        from vecenv.bench.report import _markdown
    except ImportError:
        try:
            import tabulate  # noqa: F401  # pandas' to_markdown needs it
        except ImportError:
            return frame.to_string(index=False)
        return frame.to_markdown(index=False)
    right = [column not in ("case", "statistic", "verdict") for column in frame.columns]
    return _markdown(list(frame.columns), frame.values.tolist(), right)


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="fdf003c", help="git revision whose vecenv/ is the baseline")
    parser.add_argument(
        "--baseline-tree",
        help="a directory holding the baseline's vecenv/ package (instead of --baseline: where git is absent)",
    )
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, from: {', '.join(CASES)}")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds per case (median reported)")
    parser.add_argument("--seconds", type=float, default=1.0, help="measured chunk per contender per round")
    parser.add_argument("--warmup", type=float, default=0.5, help="warm-up per contender per case, seconds")
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--aa", action="store_true", help="A/A only: the candidate against a second copy of itself")
    mode.add_argument("--no-aa", action="store_true", help="A/B only: skip the A/A noise measurement")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for any one child reply")
    parser.add_argument("--output", type=Path, default=None, help="also write the Markdown report here")
    parser.add_argument(
        "--subproc-kwargs", type=json.loads, default={}, help="JSON: SubprocVecEnv keyword arguments of every contender"
    )
    parser.add_argument(
        "--trainer-us",
        type=float,
        default=0.0,
        help="subproc cases: microseconds of CPU work in the calling process between two steps (a trainer's)",
    )
    parser.add_argument(
        "--candidate-kwargs",
        type=json.loads,
        default={},
        help="JSON: more SubprocVecEnv keyword arguments for the candidate (and its A/A copy) only",
    )
    args = parser.parse_args()
    names = [name.strip() for name in args.cases.split(",") if name.strip()]
    unknown = [name for name in names if name not in CASES]
    if unknown or not names:
        parser.error(f"unknown case(s) {unknown}; choose from {', '.join(CASES)}")
    if args.rounds < 1 or args.seconds <= 0 or args.warmup < 0:
        parser.error("--rounds must be >= 1, --seconds > 0, --warmup >= 0")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))  # so the children get stopped
    sys.path.insert(0, str(REPO))  # this process (calibration, actions, table) uses the working tree too

    import pandas as pd
    from tqdm import tqdm

    from vecenv.bench.workloads import calibrate_cpu_iterations

    labels = [CANDIDATE, CANDIDATE2] if args.aa else [BASELINE, CANDIDATE] + ([] if args.no_aa else [CANDIDATE2])
    cases = {name: CASES[name] for name in names}
    load_start = os.getloadavg()[0]
    children: dict[str, Child] = {}
    results: dict[str, dict[str, Any]] = {}
    notes: list[str] = []
    for option in ("subproc_kwargs", "candidate_kwargs", "trainer_us"):
        if getattr(args, option):
            notes.append(f"--{option.replace('_', '-')} {json.dumps(getattr(args, option))}")
    with tempfile.TemporaryDirectory(prefix="vecenv-revision-ab-") as tmp:
        trees = {CANDIDATE: REPO, CANDIDATE2: REPO}
        baseline_text = "-"
        if BASELINE in labels:
            if args.baseline_tree:
                trees[BASELINE] = Path(args.baseline_tree).resolve()
                baseline_text = f"the `vecenv/` of {args.baseline_tree}"
            else:
                trees[BASELINE] = Path(tmp) / "baseline"
                baseline_text = f"{extract(args.baseline, trees[BASELINE])} (`vecenv/` by git archive)"
            workloads = "vecenv/bench/workloads.py"
            if (trees[BASELINE] / workloads).read_bytes() != (REPO / workloads).read_bytes():
                notes.append(f"{workloads} differs between the trees: the env work may differ too.")
        # once, here, for both trees: every contender does the same number of busy-loop iterations per step
        cpu_iterations = calibrate_cpu_iterations() if any(c.workload == "cpu" for c in cases.values()) else None
        try:
            for label in labels:
                children[label] = Child(label, trees[label], args.timeout)
            for child in children.values():
                child.started()
            with tqdm(total=len(cases) * args.rounds, desc="rounds") as progress:
                for name, case in cases.items():
                    progress.set_postfix_str(name)
                    results[name] = run_case(case, children, args, cpu_iterations, progress)
        finally:
            for child in children.values():
                child.stop()
    frame = pd.DataFrame([table_row(name, cases[name], result) for name, result in results.items()])
    try:
        head = git("rev-parse", "--short", "HEAD")
        dirty = git("status", "--porcelain", "--", "vecenv")
    except (OSError, subprocess.CalledProcessError):  # a copy of the tree without git (another machine)
        head, dirty = os.environ.get("VECENV_COMMIT", "unknown"), ""
    date = datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    cpu_text = f"; cpu workload {cpu_iterations} busy-loop iterations per step" if cpu_iterations else ""
    steps = ", ".join(f"{name} {result['steps']}" for name, result in results.items())
    lines = [
        f"Machine: {os.cpu_count()} cores ({cpu_model()}); Python {platform.python_version()}; {date}; "
        f"load average {load_start:.2f} -> {os.getloadavg()[0]:.2f}.",
        "",
        f"Baseline: {baseline_text}; candidate: working tree at {head}"
        f"{' with uncommitted changes in vecenv/' if dirty else ''}"
        f"{' (A/A only)' if args.aa else ''}. {args.rounds} rounds of ~{args.seconds:g} s per contender after "
        f"{args.warmup:g} s of warm-up (vector steps per chunk: {steps}){cpu_text}; SubprocVecEnv with its "
        f"defaults{' except the keyword arguments below' if args.subproc_kwargs or args.candidate_kwargs else ''}.",
        "",
        render(frame),
        "",
        "baseline / candidate: median over rounds of each process's env-steps/s (subproc), DummyVecEnv overhead "
        "in us/env-step over a plain loop in the same process and round (dummy), step_wait's time in "
        "us/env-step once every worker has replied (collect), or step_async's CPU time in us/env-step, every "
        "worker idle (send). A/B: per round, candidate / baseline (subproc) or "
        "candidate - baseline (dummy, collect, send); A/A: the same with a second candidate process "
        "against the first, in the same rounds. Median and quartiles over rounds. verdict: A/B's p25..p75 "
        "entirely above or below A/A's, else within A/A noise.",
        *notes,
    ]
    report = "\n".join(lines)
    print(report)
    if args.output is not None:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        tmp_path = args.output.with_suffix(".tmp")
        tmp_path.write_text(report + "\n")
        tmp_path.replace(args.output)


if __name__ == "__main__":
    main()
