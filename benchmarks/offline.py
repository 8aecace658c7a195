#!/usr/bin/env python3
"""Prepare figures of the documentation to be measured on a machine without internet access or git history
(a machine lent for a few minutes, say): the wheels of the packages they need, for that machine's Python, and
the ``vecenv/`` tree of each revision their A/B runs compare against.

    python benchmarks/offline.py --only sixteen-again --python-version 3.12 --dest .offline

then, there, in a copy of the repository with ``.offline`` in it::

    python3 -m pip install --no-index --no-deps --target /tmp/site .offline/wheels/*.whl
    PYTHONPATH=/tmp/site VECENV_COMMIT=COMMIT python3 benchmarks/figures.py --only sixteen-again \\
        --trees .offline/trees --budget 540 --out /tmp/figures --archive figures.tgz

(``VECENV_COMMIT``: the commit the copy holds, for the reports, which cannot ask git there; this command prints
it, ``+dirty`` with local changes.)

The wheels are those of ``--packages`` and of everything they require, at the versions installed where this
runs (so both machines run the same code), except the distributions of ``--have`` and what only they require:
the packages the other machine already has (by default numpy, SciPy, torch, OpenCV, pandas and matplotlib; a CUDA
build of torch is gigabytes). Requirements are read from the installed distributions' metadata; their
environment markers are evaluated for ``--python-version`` (a requirement for an extra is left out). Binary
wheels are taken for CPython ``--python-version`` on x86-64 Linux (``--platform``, repeated: manylinux tags).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Sequence
from importlib import metadata
from pathlib import Path

import figures  # same directory: run as python benchmarks/offline.py
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from revision_ab import extract

from vecenv.bench.machine import vecenv_commit

#: what the documentation's benchmarks import beyond vecenv's own requirements
PACKAGES = ("gymnasium", "stable-baselines3", "ale-py", "pettingzoo", "mpe2", "supersuit")
#: what a machine with a GPU usually has: left out, with what only they require
HAVE = ("numpy", "scipy", "torch", "opencv-python", "pandas", "matplotlib")
PLATFORMS = (
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
)


def requirement_closure(
    roots: Iterable[str],
    have: Iterable[str],
    python_version: str,
    requires: Callable[[str], Sequence[str] | None] = metadata.requires,
) -> list[str]:
    """The distributions ``roots`` need: themselves and what they require, recursively, in canonical names,
    sorted; a distribution of ``have`` is neither taken nor looked into.

    :param python_version: ``X.Y``: the Python whose environment markers are evaluated (no extra is selected).
    :param requires: a distribution's requirement strings (:func:`importlib.metadata.requires`).
    :raises PackageNotFoundError: naming a distribution that is needed but not installed here.
    """
    environment = {**default_environment(), "python_version": python_version, "extra": ""}
    environment["python_full_version"] = f"{python_version}.0"
    skip = {canonicalize_name(name) for name in have}
    found: set[str] = set()
    todo = [canonicalize_name(name) for name in roots]
    while todo:
        name = todo.pop()
        if name in found or name in skip:
            continue
        try:
            lines = requires(name) or []
        except metadata.PackageNotFoundError as error:
            raise metadata.PackageNotFoundError(
                f"{name} is needed but not installed here: install it (the wheels take the versions installed)"
            ) from error
        found.add(name)
        for line in lines:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate(environment):
                todo.append(canonicalize_name(requirement.name))
    return sorted(found)


def download_command(
    pins: Sequence[str], dest: Path, python_version: str, platforms: Sequence[str] = PLATFORMS
) -> list[str]:
    """``pip download`` of exactly ``pins`` (``name==version``, no dependencies) as wheels for CPython
    ``python_version`` on ``platforms`` into ``dest``."""
    return [
        *(sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--dest", str(dest)),
        *("--python-version", python_version, "--implementation", "cp"),
        *(arg for platform in platforms for arg in ("--platform", platform)),
        *pins,
    ]


def main(argv: Sequence[str] | None = None) -> int:
    """Parse ``argv``, fetch the wheels and extract the trees; return the exit status."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", required=True, metavar="NAME,...", help="the figures to prepare (figures.py's)")
    parser.add_argument("--dest", type=Path, default=Path(".offline"), help="where to put them (default: .offline)")
    parser.add_argument("--python-version", required=True, help="the other machine's Python, X.Y")
    parser.add_argument("--packages", default=",".join(PACKAGES), help="what to take (default: %(default)s)")
    parser.add_argument("--have", default=",".join(HAVE), help="what to leave out (default: %(default)s)")
    parser.add_argument("--platform", action="append", help=f"a wheel platform tag (default: {', '.join(PLATFORMS)})")
    args = parser.parse_args(argv)
    try:
        chosen = [figures.figure_named(n.strip()) for n in args.only.split(",") if n.strip()]
    except KeyError as error:
        parser.error(str(error.args[0]))
    if args.python_version.count(".") != 1 or not args.python_version.replace(".", "").isdigit():
        parser.error(f"--python-version must be X.Y, got {args.python_version!r}")

    wheels, trees = args.dest / "wheels", args.dest / "trees"
    base = [Requirement(line).name for line in metadata.requires("vecenv") or [] if "extra ==" not in line]
    roots = [*base, *(name for name in args.packages.split(",") if name)]
    try:
        names = requirement_closure(roots, args.have.split(","), args.python_version)
    except metadata.PackageNotFoundError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    pins = [f"{name}=={metadata.version(name)}" for name in names]
    shutil.rmtree(wheels, ignore_errors=True)
    wheels.mkdir(parents=True)
    download = download_command(pins, wheels, args.python_version, args.platform or PLATFORMS)
    print("$", " ".join(download), flush=True)
    if subprocess.run(download, check=False).returncode:
        print("error: pip download failed (a wheel for that Python or platform may not exist)", file=sys.stderr)
        return 1
    for rev in dict.fromkeys(rev for figure in chosen for rev in figures.baselines(figure)):
        shutil.rmtree(trees / rev, ignore_errors=True)
        print(f"{rev}: {extract(rev, trees / rev)}'s vecenv/ in {trees / rev}")
    size = sum(f.stat().st_size for f in args.dest.rglob("*") if f.is_file())
    print(f"{len(pins)} wheels and {len(list(trees.glob('*')))} trees in {args.dest}: {size / 2**20:.1f} MiB")
    commit = vecenv_commit() or "unknown"
    print(
        f"there: python3 -m pip install --no-index --no-deps --target /tmp/site {wheels}/*.whl && "
        f"PYTHONPATH=/tmp/site VECENV_COMMIT={commit} python3 benchmarks/figures.py --only {args.only} "
        f"--trees {trees} --budget SECONDS --out /tmp/figures --archive figures.tgz"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
