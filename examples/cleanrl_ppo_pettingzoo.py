"""CleanRL-style PPO with parameter sharing on a PettingZoo env: mpe2's simple_spread_v3 (discrete actions) by default.

One policy acts for every agent: ``vecenv.pettingzoo.make_vec_env`` gives ``--num-envs`` copies of the env as one
vector env with one row per agent (``num_envs x 3`` rows for simple_spread), and the loop is CleanRL's ``ppo.py``
(https://docs.cleanrl.dev/rl-algorithms/ppo/) over those rows, with SB3's vector-env API (``reset() -> obs``,
``step(actions) -> (obs, rewards, dones, infos)``, autoreset in the same step). The network, the advantages and
the update epochs are those of ``cleanrl_ppo.py`` beside this file. Rows whose agent was not in ``env.agents``
during a step (``infos[k]["active"]`` False: it left the episode early, or joins later) are left out of the
update. ``--total-timesteps`` counts agent-steps (rows x vector steps), as CleanRL's PettingZoo examples do.

Run it (needs torch and the pettingzoo extra with mpe2)::

    python examples/cleanrl_ppo_pettingzoo.py --total-timesteps 2000000
    python examples/cleanrl_ppo_pettingzoo.py --total-timesteps 768 --num-envs 2 --num-steps 64   # smoke test

It prints ``global_step=..., agent=..., episodic_return=...`` for every finished agent episode (``VecMonitor``,
one per row and episode) and, at the end, ``finished agent episodes: N (mean return of the last 30: R)``.
"""

from __future__ import annotations

import argparse
import importlib
import random
import time
from typing import Any

import numpy as np
import torch
from cleanrl_ppo import Agent, compute_returns, update_policy  # same directory: run as python examples/...
from torch import optim

from vecenv import DummyVecEnv, SubprocVecEnv, VecMonitor
from vecenv.pettingzoo import make_vec_env


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--env-module",
        default="mpe2.simple_spread_v3",
        help="a PettingZoo env module whose parallel_env(max_cycles=..., continuous_actions=False) makes the env, as "
        "the MPE envs' do (agents with one Discrete action space)",
    )
    parser.add_argument("--max-cycles", type=int, default=25, help="steps per episode (parallel_env(max_cycles=...))")
    parser.add_argument("--seed", type=int, default=1, help="seed of the experiment")
    parser.add_argument("--torch-deterministic", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--total-timesteps", type=int, default=2_000_000, help="total agent-steps of the experiment")
    parser.add_argument("--learning-rate", type=float, default=2.5e-4, help="the optimizer's learning rate")
    parser.add_argument("--num-envs", type=int, default=8, help="copies of the env (each gives one row per agent)")
    parser.add_argument("--num-steps", type=int, default=128, help="steps per row per rollout")
    parser.add_argument("--vec-env", choices=("subproc", "dummy"), default="subproc", help="vecenv backend")
    parser.add_argument("--n-workers", type=int, default=None, help="subproc: worker processes (default: one per core)")
    parser.add_argument("--anneal-lr", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--gamma", type=float, default=0.99, help="discount factor")
    parser.add_argument("--gae-lambda", type=float, default=0.95, help="lambda of the general advantage estimation")
    parser.add_argument("--num-minibatches", type=int, default=4, help="number of mini-batches")
    parser.add_argument("--update-epochs", type=int, default=4, help="epochs to update the policy")
    parser.add_argument("--norm-adv", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--clip-coef", type=float, default=0.2, help="surrogate clipping coefficient")
    parser.add_argument("--clip-vloss", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--ent-coef", type=float, default=0.01, help="coefficient of the entropy")
    parser.add_argument("--vf-coef", type=float, default=0.5, help="coefficient of the value function")
    parser.add_argument("--max-grad-norm", type=float, default=0.5, help="maximum norm for gradient clipping")
    parser.add_argument("--target-kl", type=float, default=None, help="target KL divergence threshold")
    return parser.parse_args(argv)


def make_envs(args: argparse.Namespace) -> VecMonitor:
    """``--num-envs`` copies of the env, one row per agent, with episode statistics per row (VecMonitor)."""
    env_module = importlib.import_module(args.env_module)
    kwargs: dict[str, Any] = {"max_cycles": args.max_cycles, "continuous_actions": False}
    vec_env_cls = SubprocVecEnv if args.vec_env == "subproc" else DummyVecEnv
    vec_env_kwargs = {"n_workers": args.n_workers} if args.vec_env == "subproc" else {}
    agents = make_vec_env(
        env_module.parallel_env,
        n_envs=args.num_envs,
        seed=args.seed,
        env_kwargs=kwargs,
        vec_env_cls=vec_env_cls,
        vec_env_kwargs=vec_env_kwargs,
    )
    return VecMonitor(agents)


def report_episodes(infos: list[dict[str, Any]], global_step: int, returns: list[float]) -> None:
    """Print the agent episodes that ended in this step (VecMonitor's ``"episode"`` info of the row)."""
    for info in infos:
        episode = info.get("episode")
        if episode is not None:
            returns.append(float(episode["r"]))
            print(
                f"global_step={global_step}, env={info['env_index']}, agent={info['agent_id']}, "
                f"episodic_return={episode['r']:.2f}, episodic_length={episode['l']}"
            )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic

    envs = make_envs(args)
    rows = envs.num_envs  # num_envs copies x agents
    args.batch_size = rows * args.num_steps
    args.num_iterations = max(1, args.total_timesteps // args.batch_size)
    print(f"{args.env_module}: {args.num_envs} envs x {len(envs.possible_agents)} agents = {rows} rows")
    try:
        agent = Agent(envs.observation_space, envs.action_space)
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

        obs = torch.zeros((args.num_steps, rows, *envs.observation_space.shape))
        actions = torch.zeros((args.num_steps, rows, *envs.action_space.shape))
        logprobs = torch.zeros((args.num_steps, rows))
        rewards = torch.zeros((args.num_steps, rows))
        dones = torch.zeros((args.num_steps, rows))
        values = torch.zeros((args.num_steps, rows))
        active = np.zeros((args.num_steps, rows), dtype=bool)  # the row's agent acted in the step

        global_step = 0
        start_time = time.time()
        returns: list[float] = []
        next_obs = torch.Tensor(envs.reset())
        next_done = torch.zeros(rows)

        for iteration in range(1, args.num_iterations + 1):
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            for step in range(args.num_steps):
                global_step += rows
                obs[step] = next_obs
                dones[step] = next_done

                with torch.no_grad():
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                    values[step] = value.flatten()
                actions[step] = action
                logprobs[step] = logprob

                next_obs_np, reward, next_done_np, infos = envs.step(action.numpy())
                rewards[step] = torch.as_tensor(reward)
                active[step] = [info["active"] for info in infos]
                next_obs = torch.Tensor(next_obs_np)
                next_done = torch.Tensor(next_done_np)
                report_episodes(infos, global_step, returns)

            advantages, returns_t = compute_returns(agent, next_obs, next_done, rewards, dones, values, args)
            # the samples of the update: only the rows whose agent acted (flattened step-major, as the rollout)
            b_inds = np.flatnonzero(active.reshape(-1))
            approx_kl, clipfracs = update_policy(
                agent, optimizer, (obs, logprobs, actions, advantages, returns_t, values), b_inds, args
            )

            sps = int(global_step / (time.time() - start_time))
            print(
                f"iteration={iteration}/{args.num_iterations} global_step={global_step} SPS={sps} "
                f"approx_kl={approx_kl.item():.4f} clipfrac={np.mean(clipfracs):.3f}"
            )
        recent = returns[-30:]
        mean_recent = float(np.mean(recent)) if recent else float("nan")
        print(f"finished agent episodes: {len(returns)} (mean return of the last 30: {mean_recent:.2f})")
    finally:
        envs.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
