"""Measuring the figures on a machine without internet access or git history: ``benchmarks/figures.py``'s
``--trees``, ``--budget`` and ``--archive``, and ``benchmarks/offline.py``'s wheel list."""

from __future__ import annotations

import importlib.metadata
import os
import sys
import tarfile
import time
from pathlib import Path

import pytest

from .bench_scripts import load_bench_script

figures = load_bench_script("figures_offline_under_test", "figures.py")
offline = load_bench_script("offline_under_test", "offline.py")


def test_baselines_are_read_from_the_trees_folder(capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["python", "benchmarks/revision_ab.py", "--baseline", "3aea034", "--cases", "x", "--baseline-kwargs", "{}"]
    assert figures.with_trees(argv, None) == argv
    contender = ["python", "benchmarks/pettingzoo_bench.py", "--baseline", "supersuit-16cpu"]
    assert figures.with_trees(contender, "T") == contender  # a contender's name, not a revision
    assert figures.with_trees(argv, "T") == [
        *("python", "benchmarks/revision_ab.py", "--baseline-tree", os.path.join("T", "3aea034")),
        *("--cases", "x", "--baseline-kwargs", "{}"),
    ]
    again = figures.figure_named("sixteen-again")
    # its --baseline-tree . layouts and pettingzoo_bench.py's --baseline contender are not revisions
    assert figures.baselines(again) == ["3aea034"]
    assert figures.main(["--only", "sixteen-again", "--dry-run", "--trees", "T"]) == 0
    printed = capsys.readouterr().out
    assert f"--baseline-tree {os.path.join('T', '3aea034')} " in printed
    assert "revision_ab.py --baseline " not in printed
    assert "--contenders plain,supersuit-16cpu,vecenv-subproc --baseline supersuit-16cpu" in printed


def _figure(*steps: tuple[str, ...], outputs: tuple[str, ...] = ()) -> object:
    return figures.Figure(
        name="fake",
        sections=(),
        commits=(),
        snapshots=(),
        steps=tuple(figures.Step(argv) for argv in steps),
        outputs=outputs,
    )


def _fields(tmp_path: Path) -> dict[str, str]:
    """The fields of a run of figures' commands, with ``tmp_path`` as the output and work folders."""
    return {"python": sys.executable, "out": str(tmp_path), "work": str(tmp_path), "date": "2031-01-02"}


def test_the_budget_ends_a_command_with_its_children_and_starts_no_other(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A command still running at the end of the budget is ended with the processes it started; the next one
    is not run; both are reported, and the outputs they would have written are not reported missing."""
    monkeypatch.setattr(figures, "MIN_STEP_SECONDS", 0.5)
    pid_file = tmp_path / "child.pid"
    sleeper = (
        "import subprocess, sys, time; "
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(120)']); "
        f"open({str(pid_file)!r}, 'w').write(str(child.pid)); time.sleep(120)"
    )
    fake = _figure(
        ("{python}", "-c", sleeper + " # first.txt"),
        ("{python}", "-c", "open('{out}/second.txt', 'w').write('done')"),
        outputs=("first.txt", "second.txt"),
    )
    fields = _fields(tmp_path)
    problems = figures.run_figure(fake, fields, deadline=time.monotonic() + 4.0)
    assert not (tmp_path / "second.txt").exists()
    assert [p.split(":")[1].strip() for p in problems] == [
        "ended at the end of the budget",
        "not run, out of the budget",
    ]
    assert "sleep(120)" in problems[0] and "second.txt" in problems[1]
    child = int(pid_file.read_text())
    state = ""
    for _ in range(600):  # a killed process still runs until the kernel schedules its exit
        try:
            state = Path(f"/proc/{child}/stat").read_text().split(")")[-1].split()[0]
        except FileNotFoundError:
            state = "gone"
        if state in ("gone", "Z"):
            break
        time.sleep(0.05)
    assert state in ("gone", "Z"), f"the command's own child {child} outlived the budget (state {state})"


def test_a_failed_command_and_a_missing_output_are_reported(tmp_path: Path) -> None:
    fake = _figure(
        ("{python}", "-c", "raise SystemExit(3)"), ("{python}", "-c", "pass  # made.txt"), outputs=("made.txt",)
    )
    fields = _fields(tmp_path)
    problems = figures.run_figure(fake, fields)
    assert len(problems) == 2
    assert "exited with status 3" in problems[0]
    assert problems[1] == f"fake: {tmp_path / 'made.txt'} was not written"


def test_only_the_chosen_programs_run_and_only_what_ran_must_be_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``programs`` leaves the other steps out, unreported; a step that ran must write the outputs it names, and
    only those (another step's missing output is not its problem)."""
    script = tmp_path / "writer.py"
    script.write_text("import sys; open(sys.argv[1], 'w').write('done')\n")
    fake = _figure(
        ("{python}", str(script), "{out}/a.txt"),
        ("{python}", "-c", "pass  # it should write b.txt"),
        outputs=("a.txt", "b.txt"),
    )
    fields = _fields(tmp_path)
    assert [figures.program(step) for step in fake.steps] == ["writer.py", "-c"]
    assert [figures.step_outputs(fake, step) for step in fake.steps] == [["a.txt"], ["b.txt"]]
    assert figures.run_figure(fake, fields, programs=["writer.py"]) == []
    assert (tmp_path / "a.txt").read_text() == "done"
    assert figures.run_figure(fake, fields) == [f"fake: {tmp_path / 'b.txt'} was not written"]
    capsys.readouterr()
    assert figures.main(["--only", "sixteen-again", "--dry-run", "--programs", "goals.py,trainers.py"]) == 0
    printed = [line for line in capsys.readouterr().out.splitlines() if not line.startswith("#")]
    assert [line.split()[1] for line in printed] == ["benchmarks/goals.py", "benchmarks/trainers.py"]


def test_every_output_is_written_by_a_step() -> None:
    """Each output of each figure is named by one of its steps (its command, standard output or copies), so a
    command that ran is held to it."""
    for figure in figures.FIGURES:
        for output in figure.outputs:
            assert any(output in figures.step_outputs(figure, step) for step in figure.steps), (figure.name, output)
    assert figures.program(figures.figure_named("sixteen-again").steps[2]) == "vecenv"


def test_the_archive_holds_every_result_and_the_problems(tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    (out / "a.md").write_text("| a |\n")
    (out / "b.json").write_text("{}")
    archive = tmp_path / "results.tgz"
    figures.write_archive(str(out), str(archive), ["fake: not run, out of the budget: x"])
    with tarfile.open(archive) as tar:
        members = {m.name: tar.extractfile(m).read().decode() for m in tar.getmembers() if m.isfile()}  # type: ignore[union-attr]
    assert members == {"a.md": "| a |\n", "b.json": "{}", "problems.txt": "fake: not run, out of the budget: x\n"}
    assert not (tmp_path / "results.tgz.partial").exists()


def test_a_budget_must_be_positive() -> None:
    with pytest.raises(SystemExit):
        figures.main(["--only", "pettingzoo", "--budget", "0"])


def test_the_wheels_are_what_the_packages_require_less_what_the_machine_has() -> None:
    """The closure follows every requirement whose marker holds on the other machine's Python (no extra), and
    stops at a distribution of ``have``: what only it requires is left out."""
    graph = {
        "app": ["Lib_A>=1", "lib-b; python_version < '3.12'", "lib-c[fast]", "docs-tool; extra == 'docs'"],
        "lib-a": ["lib-c", "app"],  # a cycle
        "lib-b": ["lib-d"],
        "lib-c": ["torch"],
        "torch": ["only-torch-needs-this"],
    }

    def requires(name: str) -> list[str]:
        if name not in graph:
            raise importlib.metadata.PackageNotFoundError(name)
        return graph[name]

    assert offline.requirement_closure(["App"], ["torch"], "3.12", requires) == ["app", "lib-a", "lib-c"]
    with pytest.raises(importlib.metadata.PackageNotFoundError, match="lib-d is needed but not installed here"):
        offline.requirement_closure(["App"], ["torch"], "3.11", requires)


def test_the_download_takes_exact_versions_as_wheels_for_the_other_python(tmp_path: Path) -> None:
    argv = offline.download_command(
        ["gymnasium==1.2.0", "ale-py==0.11.2"], tmp_path, "3.12", ("manylinux_2_28_x86_64",)
    )
    assert argv[:4] == [sys.executable, "-m", "pip", "download"]
    for pair in (["--python-version", "3.12"], ["--implementation", "cp"], ["--dest", str(tmp_path)]):
        assert any(argv[i : i + 2] == pair for i in range(len(argv))), pair
    assert {"--no-deps", "--only-binary=:all:", "gymnasium==1.2.0", "ale-py==0.11.2"} <= set(argv)
    assert argv[argv.index("--platform") + 1] == "manylinux_2_28_x86_64"


def test_reports_name_the_commit_given_where_git_is_absent(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import vecenv
    from vecenv.bench import machine

    monkeypatch.setattr(vecenv, "__file__", str(tmp_path / "vecenv" / "__init__.py"))  # a copy without .git
    monkeypatch.delenv("VECENV_COMMIT", raising=False)
    assert machine.vecenv_commit() is None
    monkeypatch.setenv("VECENV_COMMIT", "abc1234")
    assert machine.vecenv_commit() == "abc1234"
