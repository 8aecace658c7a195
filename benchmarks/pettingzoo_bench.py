"""PettingZoo: N copies of mpe2's ``simple_spread_v3`` (3 agents, discrete actions) stepped with random actions,
vecenv against SuperSuit, in ONE process, paired.

Every contender is built first (N env copies each, one row per agent, so N x 3 rows):

- ``plain``: the N envs stepped in a Python loop in this process, no vector env (``env.step({agent: action})``,
  ``env.reset()`` when ``env.agents`` is empty): the reference; C usable cores cannot step more than C times
  its rate, the ``ceiling`` line of the report;
- ``supersuit-2cpu``: ``concat_vec_envs_v1(pettingzoo_env_to_vec_env_v1(env), N, num_cpus=2, base_class=BASE)``
  (two worker processes of SuperSuit's own; the baseline of the ratio column);
- ``supersuit-0cpu``: the same with ``num_cpus=0``: every env in this process; any ``supersuit-<K>cpu`` names
  ``num_cpus=K`` (``supersuit-16cpu`` on 16 cores);
- ``vecenv-subproc``: ``vecenv.pettingzoo.make_vec_env(parallel_env, N, vec_env_cls=SubprocVecEnv)``, vecenv's
  default layout (one worker per usable core);
- ``vecenv-parent``: the same with ``vec_env_kwargs={"n_workers": C - 1, "parent_envs": N // C}`` (C usable
  cores, C >= 2): this process steps one share of the envs itself;
- ``vecenv-dummy``: ``vec_env_cls=DummyVecEnv``.

``BASE`` is ``"stable_baselines3"`` where stable-baselines3 is importable (SuperSuit's SB3 wrapper needs it), else
``"gymnasium"`` (``--supersuit-base``); the report says which. Actions are seeded batches sampled from the row
action space before timing, cycled, the same for every contender. After a warm-up, ``--rounds`` rounds step every
contender for ``--seconds`` in turn, the order rotated each round, so that noise from other processes hits all
alike. ``agent-steps/s`` (rows stepped per second: vector steps x rows) is the median over rounds, and
``x supersuit-2cpu`` the median of the per-round ratios to that contender (``--baseline`` names another), with
their quartiles (the spread of the pairing: what the machine's noise does to the ratio). For vecenv's worker layouts,
``caller us/step`` is the calling process's time per vector step (the whole ``step`` of the rows, over the timed
chunks) and ``busy`` that time less the wait for the workers (``step_stats()`` of the vector env of the env
copies): its own work of sending, collecting and building the rows; ``cpu`` is the CPU time the calling thread used
over the timed chunks (user and system, its waits' system calls and any spinning for replies included), per vector
step: that work without the time other processes held its core.

    python benchmarks/pettingzoo_bench.py                                 # 16 envs, 10 rounds of 0.5 s
    python benchmarks/pettingzoo_bench.py --num-envs 8 --rounds 5 --output pz.md --json pz.json
    python benchmarks/pettingzoo_bench.py --contenders vecenv-subproc,supersuit-2cpu --rounds 20
    python benchmarks/pettingzoo_bench.py -n 64 --contenders plain,supersuit-16cpu,vecenv-subproc \
        --baseline supersuit-16cpu
"""

from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import re
from collections.abc import Sequence
from typing import Any

import numpy as np
from paired import rate, write_results  # same directory: run as python benchmarks/pettingzoo_bench.py
from scaling import Contender, batches_for

from vecenv.bench.machine import cpu_model, cpus_usable, machine_info, package_version, vecenv_commit
from vecenv.bench.tables import render_markdown
from vecenv.cli_args import json_object, positive_float, positive_int

CONTENDERS = ("plain", "supersuit-2cpu", "supersuit-0cpu", "vecenv-subproc", "vecenv-parent", "vecenv-dummy")
BASELINE = "supersuit-2cpu"
COLUMNS = [
    "contender",
    "layout",
    "agent-steps/s",
    "x BASELINE",
    "quartiles",
    "caller us/step",
    "busy us/step",
    "cpu us/step",
]
_SUPERSUIT = re.compile(r"supersuit-(\d+)cpu")
ENV_KWARGS = {"max_cycles": 25, "continuous_actions": False}


def _parallel_env(**kwargs: Any) -> Any:
    from mpe2 import simple_spread_v3

    return simple_spread_v3.parallel_env(**kwargs)


class PlainLoop:
    """``n`` PettingZoo envs stepped one after the other in this process; ``step`` takes one action per row."""

    def __init__(self, n: int, env_kwargs: dict[str, Any]) -> None:
        self.envs = [_parallel_env(**env_kwargs) for _ in range(n)]
        for i, env in enumerate(self.envs):
            env.reset(seed=i)
        self.agents = list(self.envs[0].possible_agents)
        self.action_space = self.envs[0].action_space(self.agents[0])
        self.num_envs = n * len(self.agents)

    def step(self, actions: np.ndarray) -> None:
        width = len(self.agents)
        for i, env in enumerate(self.envs):
            row = actions[i * width : (i + 1) * width].tolist()
            env.step({agent: row[j] for j, agent in enumerate(self.agents) if agent in env.agents})
            if not env.agents:
                env.reset()

    def close(self) -> None:
        for env in self.envs:
            env.close()


def supersuit_cpus(name: str) -> int | None:
    """``num_cpus`` of SuperSuit contender ``name`` (``"supersuit-16cpu"`` -> 16); ``None`` for any other."""
    match = _SUPERSUIT.fullmatch(name)
    return int(match.group(1)) if match else None


def layout(name: str, n: int, cores: int, base_class: str) -> str:
    """The constructor a contender stands for, in words."""
    if name == "plain":
        return f"for env in envs: env.step(...) ({n} envs, this process)"
    cpus = supersuit_cpus(name)
    if cpus is not None:
        return f"concat_vec_envs_v1(..., {n}, num_cpus={cpus}, base_class={base_class!r})"
    if name == "vecenv-dummy":
        return "make_vec_env(..., vec_env_cls=DummyVecEnv)"
    if name == "vecenv-parent":
        return f"SubprocVecEnv(n_workers={cores - 1}, parent_envs={n // cores})"
    return f"SubprocVecEnv() ({min(cores, n)} workers)"


def build(name: str, n: int, env_kwargs: dict[str, Any], cores: int, base_class: str) -> Contender:
    """Build and reset contender ``name`` over ``n`` env copies."""
    if name == "plain":
        plain = PlainLoop(n, env_kwargs)
        return Contender(name, plain.num_envs, plain.step, batches_for(plain.action_space, plain.num_envs), plain.close)
    cpus = supersuit_cpus(name)
    if cpus is not None:
        import supersuit

        venv = supersuit.concat_vec_envs_v1(
            supersuit.pettingzoo_env_to_vec_env_v1(_parallel_env(**env_kwargs)),
            n,
            num_cpus=cpus,
            base_class=base_class,
        )
        venv.reset()  # no seed: SuperSuit's SB3 wrapper passes it to seed(), which its vector env lacks
        return Contender(name, venv.num_envs, venv.step, batches_for(venv.action_space, venv.num_envs), venv.close)
    from vecenv import DummyVecEnv, SubprocVecEnv
    from vecenv.pettingzoo import make_vec_env

    vec_env_cls: type[DummyVecEnv | SubprocVecEnv] = DummyVecEnv if name == "vecenv-dummy" else SubprocVecEnv
    kwargs = {"n_workers": cores - 1, "parent_envs": n // cores} if name == "vecenv-parent" else {}
    agents = make_vec_env(
        _parallel_env, n, seed=0, env_kwargs=env_kwargs, vec_env_cls=vec_env_cls, vec_env_kwargs=kwargs
    )
    agents.reset()
    stats = agents.venv if vec_env_cls is SubprocVecEnv else None
    rows = agents.num_envs
    return Contender(name, rows, agents.step, batches_for(agents.action_space, rows), agents.close, stats, outer=True)


def run(args: argparse.Namespace, cores: int, base_class: str) -> list[dict[str, Any]]:
    """Every contender in paired interleaved rounds; one record per contender, in ``args.contenders`` order."""
    built: list[Contender] = []
    try:
        for name in args.contenders:
            built.append(build(name, args.num_envs, args.env_kwargs, cores, base_class))
        for c in built:  # warm-up: first steps, page faults, the workers' first messages
            rate(c.one, c.num_envs, args.warmup)
            c.rates.clear()
            c.reset_accounts()
        for r in range(args.rounds):
            shift = r % len(built)
            for c in built[shift:] + built[:shift]:
                c.chunk(args.seconds)
    finally:
        for c in built:
            c.close()
    baseline = next((c for c in built if c.name == args.baseline), None)
    records = []
    for c in built:
        rates = np.array(c.rates)
        record: dict[str, Any] = {
            "contender": c.name,
            "layout": layout(c.name, args.num_envs, cores, base_class),
            "rows": c.num_envs,
            "rates": c.rates,
            "rate": float(np.median(rates)),
        }
        if baseline is not None:
            record["ratio"] = float(np.median(rates / np.array(baseline.rates)))
            record["ratios"] = (rates / np.array(baseline.rates)).tolist()
        record |= c.accounts_us()
        records.append(record)
    return records


def table(records: list[dict[str, Any]], baseline: str = BASELINE) -> str:
    """The Markdown table of ``records``, ratios to ``baseline``."""
    rows = [
        [
            r["contender"],
            f"`{r['layout']}`",
            f"{r['rate']:,.0f}",
            f"{r['ratio']:.2f}" if "ratio" in r else "",
            "{:.2f}..{:.2f}".format(*np.percentile(r["ratios"], [25, 75])) if "ratios" in r else "",
            f"{r['caller_us']:.0f}" if "caller_us" in r else "",
            f"{r['busy_us']:.0f}" if "busy_us" in r else "",
            f"{r['cpu_us']:.0f}" if "cpu_us" in r else "",
        ]
        for r in records
    ]
    columns = [column.replace("BASELINE", baseline) for column in COLUMNS]
    return render_markdown(columns, rows, [False, False, True, True, True, True, True, True])


def contender_list(text: str) -> list[str]:
    """``"vecenv-subproc,supersuit-2cpu"`` -> the names, each one of :data:`CONTENDERS` or ``supersuit-<K>cpu``."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in CONTENDERS and supersuit_cpus(name) is None]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"expected a comma-separated list among {', '.join(CONTENDERS)} (or supersuit-<K>cpu), got {text!r}"
        )
    return names


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--num-envs", "-n", type=positive_int, default=16, help="env copies (rows: x 3 agents)")
    p.add_argument("--env-kwargs", type=json_object, default=ENV_KWARGS, help="simple_spread_v3.parallel_env kwargs")
    p.add_argument("--contenders", type=contender_list, default=list(CONTENDERS), help=f"among {', '.join(CONTENDERS)}")
    p.add_argument(
        "--baseline", default=BASELINE, help=f"the contender the ratio column divides by (default {BASELINE})"
    )
    p.add_argument("--rounds", type=positive_int, default=10)
    p.add_argument("--seconds", type=positive_float, default=0.5, help="each contender's chunk in a round")
    p.add_argument("--warmup", type=positive_float, default=0.3, help="each contender's warm-up, in seconds")
    has_sb3 = importlib.util.find_spec("stable_baselines3") is not None
    p.add_argument(
        "--supersuit-base",
        choices=("stable_baselines3", "gymnasium"),
        default="stable_baselines3" if has_sb3 else "gymnasium",
        help="SuperSuit's base_class (default: stable_baselines3 where it is importable, else gymnasium)",
    )
    p.add_argument("--output", help="also write the report (Markdown) here")
    p.add_argument("--json", help="also write every round's rates (JSON) here")
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the benchmark, print the report; return ``{"text", "records", "machine"}``."""
    args = parser().parse_args(argv)
    cores = cpus_usable() or os.cpu_count() or 1
    if "vecenv-parent" in args.contenders and (cores < 2 or args.num_envs < cores):
        args.contenders.remove("vecenv-parent")  # needs a worker beside this process, and a share per core
    records = run(args, cores, args.supersuit_base)
    info = machine_info()
    lines = [
        f"# PettingZoo: {args.num_envs} x mpe2 simple_spread_v3 ({json.dumps(args.env_kwargs)}), random actions",
        "",
        f"Machine: {cores} usable cores ({os.cpu_count()} CPUs), {cpu_model()}, {info['python']}; "
        f"date {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}; vecenv commit {vecenv_commit()}; "
        f"load {info['load_average_start']}; pettingzoo {package_version('pettingzoo')}, mpe2 "
        f"{package_version('mpe2')}, supersuit {package_version('supersuit')}.",
        f"{args.rounds} rounds of {args.seconds} s per contender, order rotated each round; agent-steps/s is the "
        f"median over rounds, x {args.baseline} the median of the per-round ratios (with their quartiles).",
        "",
        table(records, args.baseline),
    ]
    plain = next((r for r in records if r["contender"] == "plain"), None)
    if plain is not None:
        lines += [
            "",
            f"Ceiling: {cores} cores x plain = {cores * plain['rate']:,.0f} agent-steps/s (no vector env stepping "
            f"these envs in {cores} processes can do more).",
        ]
    text = "\n".join(lines)
    print(text)
    result = {"text": text, "records": records, "machine": info}
    write_results(result, args.output, args.json)
    return result


if __name__ == "__main__":
    main()
