"""A worker's traceback names the file and shows the source line of the env code that raised, also for an env
class of the main script (which cloudpickle pickles by value, naming its code's file ``<dynamic-code>``), and the
calling process adds the source lines that the worker could not read."""

from __future__ import annotations

import multiprocessing as mp
import pickle
import subprocess
import sys
import textwrap
import traceback
from pathlib import Path

import cloudpickle
import pytest

from vecenv.errors import PackedException, RemoteTraceback, add_source_lines, dumps_keeping_file_names

#: the start methods whose workers do not inherit the main script's classes from the calling process
METHODS = [method for method in ("forkserver", "spawn") if method in mp.get_all_start_methods()]

SCRIPT = textwrap.dedent(
    """\
    import sys
    import traceback

    import gymnasium as gym
    import numpy as np

    from vecenv import SubprocVecEnv


    class BoomEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            return np.zeros(2, np.float32), {}

        def step(self, action):
            raise ValueError("boom in step")


    if __name__ == "__main__":
        for method in sys.argv[1:]:
            venv = SubprocVecEnv([BoomEnv], start_method=method)
            venv.reset()
            try:
                venv.step(np.zeros(1, np.int64))
            except ValueError:
                print(f"=== {method}")
                traceback.print_exc(file=sys.stdout)
            finally:
                venv.close()
    """
)


@pytest.mark.skipif(not METHODS, reason="neither forkserver nor spawn")
def test_main_script_env_traceback_names_the_script_and_its_line(tmp_path: Path) -> None:
    script = tmp_path / "boom_script.py"
    script.write_text(SCRIPT)
    line_number = SCRIPT.splitlines().index('        raise ValueError("boom in step")') + 1
    result = subprocess.run(
        [sys.executable, str(script), *METHODS], capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stderr
    reports = result.stdout.split("=== ")[1:]
    assert [report.splitlines()[0] for report in reports] == METHODS
    for report in reports:
        lines = report.splitlines()
        frame = lines.index(f'  File "{script}", line {line_number}, in step')
        assert lines[frame + 1] == '    raise ValueError("boom in step")'
        assert "<dynamic-code>" not in report
        assert report.count("ValueError: boom in step") == 2  # the worker's traceback and the re-raised error


def test_code_pickled_by_value_keeps_its_file_name() -> None:
    """cloudpickle names the file of code it pickles by value ``<dynamic-code>``; dumps_keeping_file_names does not,
    and what it pickles works the same."""

    def local_factor(x: int) -> int:
        return 3 * x

    assert pickle.loads(cloudpickle.dumps(local_factor)).__code__.co_filename == "<dynamic-code>"
    copy = pickle.loads(dumps_keeping_file_names([local_factor]))[0]
    assert copy.__code__.co_filename == __file__
    assert copy.__code__.co_firstlineno == local_factor.__code__.co_firstlineno
    assert copy(5) == 15


def test_the_calling_process_adds_the_source_lines_the_worker_lacked(tmp_path: Path) -> None:
    """A frame without its source line (the worker could not read the file) gets it from this process's files; the
    others are left as they are."""
    source = tmp_path / "env_code.py"
    source.write_text("def step(self, action):\n    raise ValueError('boom')\n")
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/somewhere/vecenv/env_group.py", line 373, in step\n'
        "    obs = envs[j].step(actions[j])\n"
        f'  File "{source}", line 2, in step\n'
        '  File "<dynamic-code>", line 15, in step\n'
        f'  File "{tmp_path / "missing.py"}", line 1, in f\n'
        "ValueError: boom\n"
    )
    expected = tb.replace(
        f'  File "{source}", line 2, in step\n', f"  File \"{source}\", line 2, in step\n    raise ValueError('boom')\n"
    )
    assert add_source_lines(tb) == expected
    assert add_source_lines(expected) == expected

    try:
        raise ValueError("boom")
    except ValueError as exc:
        packed = PackedException(exc, tb)
    rebuilt = packed.rebuild("worker process 1")
    assert isinstance(rebuilt.__cause__, RemoteTraceback)
    assert rebuilt.__cause__.tb == expected
    assert "    raise ValueError('boom')\n" in "".join(traceback.format_exception(rebuilt))


SCRIPT_STATE = textwrap.dedent(
    """\
    import dataclasses
    import sys

    import gymnasium as gym
    import numpy as np

    from vecenv import SubprocVecEnv


    @dataclasses.dataclass
    class State:
        t: int

        def check(self):
            if self.t > 2:
                raise ValueError("state out of range")


    class StateEnv(gym.Env):
        observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            super().reset(seed=seed)
            self.t = 0
            return np.zeros(1, np.float32), {}

        def step(self, action):
            self.t += 1
            state = State(self.t)
            state.check()
            return np.zeros(1, np.float32), 0.0, False, False, {"state": state}


    if __name__ == "__main__":
        method = sys.argv[1]
        venv = SubprocVecEnv([StateEnv], start_method=method)
        venv.reset()
        _, _, _, infos = venv.step(np.zeros(1, np.int64))  # an instance of State comes back, pickled by value
        assert infos[0]["state"] == State(1)
        print("PARENT", State.check.__code__.co_filename)
        venv.env_method("reset", options={"state": State(0)})  # and one goes to the worker, pickled by value
        venv.close()
        venv = SubprocVecEnv([StateEnv], start_method=method)  # a second vector env: its factory pickled again
        venv.reset()
        try:
            for _ in range(3):
                venv.step(np.zeros(1, np.int64))
        except ValueError as exc:
            print("WORKER", [line for line in str(exc.__cause__).splitlines() if line.startswith("  File")][-1])
        venv.close()
    """
)


@pytest.mark.skipif(not METHODS, reason="neither forkserver nor spawn")
@pytest.mark.parametrize("method", METHODS)
def test_main_script_classes_that_cross_between_processes_keep_their_file_names(tmp_path: Path, method: str) -> None:
    """An instance of a main-script class in an info (or an env_method argument) crosses between the processes
    pickled by value: loading it replaces the code of the class the process has (cloudpickle tracks it), which
    still names the script's file, in the calling process and in the workers' tracebacks."""
    script = tmp_path / "state_script.py"
    script.write_text(SCRIPT_STATE)
    line_number = SCRIPT_STATE.splitlines().index('            raise ValueError("state out of range")') + 1
    result = subprocess.run(
        [sys.executable, str(script), method], capture_output=True, text=True, timeout=60, cwd=tmp_path, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr
    lines = result.stdout.splitlines()
    assert f"PARENT {script}" in lines, result.stdout
    assert f'WORKER   File "{script}", line {line_number}, in check' in lines, result.stdout
