"""``vecenv run --compare``: after the run's summary, time the run's envs in a plain loop, ``DummyVecEnv`` and
``SubprocVecEnv`` side by side with :func:`vecenv.bench.autotune.autotune` (which is imported only then) and print
its report, with the advice: which layout to use, and why.
"""

from __future__ import annotations

import argparse
import textwrap

from vecenv.cli_args import UsageError
from vecenv.cli_summary import plural

__all__ = ["compare_layouts"]


def compare_layouts(args: argparse.Namespace) -> None:
    """``--compare``: time the run's envs in a plain loop, DummyVecEnv and SubprocVecEnv (with ``--backend
    subproc``, the run's options of that backend) with :func:`vecenv.bench.autotune.autotune`, and print its
    report with the advice."""
    from vecenv.bench.autotune import COMPARE_BUDGET, AutotuneError, autotune, compared_layouts

    options = ("n_workers", "parent_envs", "start_method", "wait_mode") if args.backend == "subproc" else ()
    subproc = {name: getattr(args, name) for name in options if getattr(args, name) is not None}
    header = (
        f"compare: the same {plural(args.num_envs, 'env')}, without wrappers, in a plain loop, DummyVecEnv and "
        "SubprocVecEnv, timed side by side (vecenv bench --autotune ENV_ID times more layouts)"
    )
    print("\n" + textwrap.fill(header, width=100, subsequent_indent="  ", break_on_hyphens=False), flush=True)
    try:
        result = autotune(
            args.env_id,
            env_kwargs=args.env_kwargs,
            num_envs=args.num_envs,
            budget=COMPARE_BUDGET,
            seed=args.seed,
            layouts=compared_layouts(args.num_envs, subproc),
            imports=args.imports,
        )
    except AutotuneError as exc:
        raise UsageError(f"argument --compare: {exc}") from None
    print(result.report())
