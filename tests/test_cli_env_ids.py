"""The env ids of packages that register their envs when imported, in ``vecenv run`` and ``vecenv bench --autotune``:
Gymnasium's ``MODULE:ENV_ID`` form, ``--import MODULE``, the package of a known namespace (``ALE`` -> ``ale_py``),
the imports in worker processes, and the error that says which of these applies.

The in-process tests use tests/envs_plugin.py, a stand-in plugin that registers CartPole as
``VecenvPlugin/CartPole-v1`` (its runs are compared with CartPole-v1's); each starts from a registry without it. The
ALE tests run the command in a subprocess, so that this process never imports ale_py.
"""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
from collections.abc import Iterator

import gymnasium as gym
import pytest

import vecenv.cli_args
from tests.envs_plugin import ENV_ID as PLUGIN_ID
from tests.test_cli import (
    DEFAULT_START_METHOD,
    TIMEOUT,
    _assert_one_line_error,
    _check_summary,
    _parse_summary,
    _reference_stats,
    _run_main,
    _stats,
    _subproc_backend,
    _vecenv_exe,
)
from vecenv.bench.autotune import AutotuneError, _env_factory
from vecenv.cli_args import EnvMaker, resolve_env_id

PLUGIN = "tests.envs_plugin"
HAS_ALE = importlib.util.find_spec("ale_py") is not None
needs_ale = pytest.mark.skipif(not HAS_ALE, reason="ale-py is not installed (test extra)")


def _forget(*namespaces: str) -> None:
    """Remove the ids of ``namespaces`` from Gymnasium's registry, and the plugin module from the imported ones."""
    for env_id in [key for key, spec in gym.registry.items() if spec.namespace in namespaces]:
        del gym.registry[env_id]
    sys.modules.pop(PLUGIN, None)


@pytest.fixture(autouse=True)
def fresh_registry() -> Iterator[None]:
    """Each test starts without the plugin's envs and without ALE's (whose package it never imports), and leaves
    the registry as it found it."""
    saved = dict(gym.registry)
    _forget("VecenvPlugin", "ALE")
    yield
    gym.registry.clear()
    gym.registry.update(saved)
    sys.modules.pop(PLUGIN, None)


# --- the forms that work ------------------------------------------------------------------------------


def test_import_option_reaches_spawned_workers(capsys: pytest.CaptureFixture[str]) -> None:
    """``--import MODULE``: imported here and in each spawned worker (which imports nothing of the test's), which
    then step the plugin's env: the same episodes as CartPole-v1's."""
    args = ["--import", PLUGIN, "-n", "2", "-s", "200", "--seed", "3", "-b", "subproc", "--start-method", "spawn"]
    code, out, err = _run_main(capsys, "run", PLUGIN_ID, *args)
    assert code == 0, err
    summary = _parse_summary(out)
    _check_summary(summary, PLUGIN_ID, 2, 200, _subproc_backend("spawn", 2))
    assert _stats(summary) == _reference_stats("CartPole-v1", 2, 200, 3)


def test_module_form(capsys: pytest.CaptureFixture[str]) -> None:
    """Gymnasium's ``MODULE:ENV_ID``: the module is imported, the env made; the summary names the id as given."""
    env_id = f"{PLUGIN}:{PLUGIN_ID}"
    code, out, err = _run_main(capsys, "run", env_id, "-n", "2", "-s", "200", "--seed", "3", "-b", "dummy")
    assert code == 0, err
    summary = _parse_summary(out)
    _check_summary(summary, env_id, 2, 200, "dummy")
    assert _stats(summary) == _reference_stats("CartPole-v1", 2, 200, 3)


def test_known_namespace_imports_its_package(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """An id of a namespace of NAMESPACE_PROVIDERS: its installed package is imported, nothing else is needed."""
    monkeypatch.setitem(vecenv.cli_args.NAMESPACE_PROVIDERS, "VecenvPlugin", (PLUGIN, "vecenv-plugin"))
    code, out, err = _run_main(capsys, "run", PLUGIN_ID, "-n", "2", "-s", "200", "--seed", "3", "-b", "dummy")
    assert code == 0, err
    assert _stats(_parse_summary(out)) == _reference_stats("CartPole-v1", 2, 200, 3)


def test_a_known_namespace_already_registered_here_is_imported_in_the_workers_too(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """vecenv's own ``vecenv/`` envs are registered in this process (the command imports vecenv.bench): the
    factory still imports their module, so that forkserver's workers, which have not, make them; the run's
    episodes are those of the env stepped here."""
    import vecenv.bench.workloads  # noqa: F401  (registers vecenv/...)

    assert resolve_env_id("vecenv/Image84-v0") == EnvMaker("vecenv/Image84-v0", ("vecenv.bench.workloads",))
    args = ["-n", "2", "-s", "40", "--seed", "3", "-b", "subproc", "--start-method", "forkserver"]
    code, out, err = _run_main(capsys, "run", "vecenv/Image84-v0", *args)
    assert code == 0, err
    _check_summary(_parse_summary(out), "vecenv/Image84-v0", 2, 40, _subproc_backend("forkserver", 2))


def test_a_known_namespace_registered_by_another_module_needs_not_its_package(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where a module of ``--import`` registered a known namespace's ids and that namespace's own package is not
    installed, the factory imports only that module."""
    monkeypatch.setitem(vecenv.cli_args.NAMESPACE_PROVIDERS, "VecenvPlugin", ("no_such_package_here", "nothing"))
    assert resolve_env_id(PLUGIN_ID, [PLUGIN]) == EnvMaker(PLUGIN_ID, (PLUGIN,))


def test_env_maker_imports_where_it_is_called() -> None:
    """The factory of a plugin's id, pickled and called where the plugin was never imported (as in a worker),
    imports it and makes the env; an id that needs no import stays a string for make_vec_env."""
    maker = resolve_env_id(f"{PLUGIN}:{PLUGIN_ID}")
    assert maker == EnvMaker(PLUGIN_ID, (PLUGIN,))
    assert maker.factory is maker
    assert resolve_env_id("CartPole-v1").factory == "CartPole-v1"
    data = pickle.dumps(maker)
    _forget("VecenvPlugin")
    env = pickle.loads(data)()
    try:
        assert env.spec is not None and env.spec.id == PLUGIN_ID
        assert env.render_mode == "rgb_array"  # as make_vec_env makes a string id
    finally:
        env.close()


def test_autotune_takes_the_same_forms() -> None:
    """``vecenv bench --autotune`` (and ``vecenv run --compare``) resolves its ENV_ID the same way; its factory
    imports the module where it is called."""
    factory, env = _env_factory(f"{PLUGIN}:{PLUGIN_ID}", {})
    env.close()
    assert (factory.env_id, factory.imports) == (PLUGIN_ID, (PLUGIN,))
    _forget("VecenvPlugin")
    by_option, env = _env_factory(PLUGIN_ID, {}, [PLUGIN])  # vecenv run --import ... --compare
    env.close()
    assert by_option == factory
    data = pickle.dumps(factory)
    _forget("VecenvPlugin")
    env = pickle.loads(data)()
    try:
        assert env.spec is not None and env.spec.id == PLUGIN_ID
    finally:
        env.close()
    with pytest.raises(
        AutotuneError,
        match=r"no env of namespace 'Elsewhere' is registered; .*MODULE:Elsewhere/Thing-v0 \(gymnasium.make's form\)$",
    ) as info:
        _env_factory("Elsewhere/Thing-v0", {})
    assert "--import" not in str(info.value)  # vecenv bench has no such option


# --- the errors ----------------------------------------------------------------------------------------


def test_known_namespace_whose_package_is_not_installed(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """ALE/... without ale-py: the error names the package and the command that installs it."""
    find_spec = vecenv.cli_args.importlib.util.find_spec
    monkeypatch.setattr(
        vecenv.cli_args.importlib.util, "find_spec", lambda name, *a: None if name == "ale_py" else find_spec(name, *a)
    )
    line = _assert_one_line_error(*_run_main(capsys, "run", "ALE/Pong-v5", "-n", "2"))
    assert line == (
        "vecenv run: error: unknown env id 'ALE/Pong-v5': the ALE/ envs are registered by the ale-py package, which "
        "is not installed: pip install ale-py"
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # a known namespace whose package is installed, but the id is not one of its envs: close ids
        (
            ["VecenvPlugin/CartPol-v1"],
            "unknown env id 'VecenvPlugin/CartPol-v1': no env 'VecenvPlugin/CartPol-v1' is registered after "
            f"importing {PLUGIN}; did you mean: {PLUGIN_ID}",
        ),
        (
            [f"{PLUGIN}:VecenvPlugin/CartPol-v1"],
            f"unknown env id '{PLUGIN}:VecenvPlugin/CartPol-v1': no env 'VecenvPlugin/CartPol-v1' is registered after "
            f"importing {PLUGIN}; did you mean: {PLUGIN_ID}",
        ),
        # an unknown namespace: the two ways to import its package (and a close known namespace)
        (
            ["Elsewhere/Thing-v0"],
            "unknown env id 'Elsewhere/Thing-v0': no env of namespace 'Elsewhere' is registered; name the "
            "module that registers it: MODULE:Elsewhere/Thing-v0 (gymnasium.make's form) or --import MODULE",
        ),
        (
            ["--import", "json", "Elsewhere/Thing-v0"],
            "unknown env id 'Elsewhere/Thing-v0': no env of namespace 'Elsewhere' is registered after "
            "importing json; name the module",
        ),
        (["ale/Pong-v5"], "no env of namespace 'ale' is registered (did you mean the namespace 'ALE'?); name the"),
        # modules that cannot be imported
        (
            ["vecenv_no_such_module:Thing-v0"],
            "argument ENV_ID: the MODULE of 'vecenv_no_such_module:Thing-v0': expected an installed Python module "
            "that registers Gymnasium envs when imported, got 'vecenv_no_such_module': no module named "
            "'vecenv_no_such_module'",
        ),
        (
            ["--import", "vecenv_no_such_module", "CartPole-v1"],
            "argument --import: expected an installed Python module that registers Gymnasium envs when imported, got "
            "'vecenv_no_such_module': no module named 'vecenv_no_such_module'",
        ),
        (
            ["--import", "tests.envs_plugn", "CartPole-v1"],
            f"no module named 'tests.envs_plugn'; did you mean: {PLUGIN},",
        ),
        (["--import", "not a module", "CartPole-v1"], "got 'not a module', which is not a Python module name"),
        (["a:b:c"], "argument ENV_ID: expected ENV_ID or MODULE:ENV_ID (a module to import, then a registered id"),
        (["mpe2.simple_spread_v3", "--import", "json"], "argument --import: imports modules that register Gymnasium"),
        # an id without namespace and no import: the close registered ids, as before
        (["CartPol-v1"], "unknown env id 'CartPol-v1' (NameNotFound); did you mean: CartPole-v1"),
    ],
)
def test_errors_say_which_case_applies(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, args: list[str], expected: str
) -> None:
    monkeypatch.setitem(vecenv.cli_args.NAMESPACE_PROVIDERS, "VecenvPlugin", (PLUGIN, "vecenv-plugin"))
    line = _assert_one_line_error(*_run_main(capsys, "run", *args, "-n", "2", "-b", "dummy"))
    assert line.startswith("vecenv run: error: ")
    assert expected in line, line


# --- ALE, in a subprocess -------------------------------------------------------------------------------


def _vecenv(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([_vecenv_exe(), *args], capture_output=True, text=True, timeout=TIMEOUT, check=False)


@needs_ale
def test_ale_pong_runs_with_its_package_imported_in_the_workers() -> None:
    """``vecenv run ALE/Pong-v5 --profile``: ale_py imported in the command and in its worker processes (the
    default start method), the summary and the profile of the steps asked for."""
    result = _vecenv("run", "ALE/Pong-v5", "-n", "2", "--steps", "40", "--profile")
    assert result.returncode == 0, result.stderr
    summary_text, profile_text = result.stdout.split("\n\n")
    summary = _parse_summary(summary_text)
    _check_summary(summary, "ALE/Pong-v5", 2, 40, _subproc_backend(DEFAULT_START_METHOD, 2))
    assert profile_text.startswith("vecenv step profile: 20 steps, 40 env-steps, ")


@needs_ale
def test_ale_typo_after_importing_its_package() -> None:
    """A typo in an ALE id: ale_py was imported, and the error names the close ALE ids."""
    result = _vecenv("run", "ALE/Pongg-v5")
    line = _assert_one_line_error(result.returncode, result.stdout, result.stderr)
    assert line.startswith(
        "vecenv run: error: unknown env id 'ALE/Pongg-v5': no env 'ALE/Pongg-v5' is registered after importing ale_py; "
        "did you mean: ALE/Pong-v5"
    ), line


def test_the_benchmark_workloads_run_by_their_ids() -> None:
    """``vecenv/...`` ids (the benchmark's workloads, which the profiling page runs): the command imports
    vecenv.bench.workloads, which registers them, in a process that never imported it."""
    result = _vecenv("run", "vecenv/Cpu200us-v0", "-n", "2", "--steps", "20", "-b", "dummy")
    assert result.returncode == 0, result.stderr
    _check_summary(_parse_summary(result.stdout), "vecenv/Cpu200us-v0", 2, 20, "dummy")


@pytest.mark.parametrize("backend", ["dummy", "subproc"])
def test_an_env_that_needs_a_missing_package_is_a_user_error(backend, capsys):
    """An env whose module imports a package that is not installed (as phys2d/... needs jax): one error line naming
    the id and the missing module, exit status 2, for ``run`` (both backends) and ``bench --autotune``."""
    from tests.envs_plugin import MISSING_PACKAGE_ID

    code, out, err = _run_main(
        capsys, "run", MISSING_PACKAGE_ID, "--import", PLUGIN, "-b", backend, "-n", "2", "-s", "8"
    )
    line = _assert_one_line_error(code, out, err)
    assert f"{MISSING_PACKAGE_ID} needs a package that is not installed" in line
    assert "No module named 'vecenv_missing_package_for_tests'" in line
    with pytest.raises(AutotuneError, match="needs a package that is not installed"):
        _env_factory(MISSING_PACKAGE_ID, {}, [PLUGIN])
