"""CleanRL-style PPO (single file) on ``vecenv.gymnasium.AsyncVectorEnv``, CartPole by default.

The loop is CleanRL's ``ppo.py`` (https://docs.cleanrl.dev/rl-algorithms/ppo/), with one change: the vector env
is ``vecenv.gymnasium.AsyncVectorEnv`` (Gymnasium's API, vecenv's worker processes and shared memory) in
``AutoresetMode.SAME_STEP``, so the observation after an episode end is already the first of the next episode
(the convention CleanRL's loop was written for) and the finished episode's statistics arrive in
``infos["final_info"]``.

Run it (needs torch)::

    python examples/cleanrl_ppo.py --total-timesteps 50000
    python examples/cleanrl_ppo.py --total-timesteps 512 --num-envs 4 --num-steps 64   # smoke test

It prints ``global_step=..., episodic_return=...`` for every finished episode and, at the end,
``finished episodes: N (mean return of the last 10: R)``.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn, optim
from torch.distributions.categorical import Categorical

from vecenv.gymnasium import AsyncVectorEnv


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--env-id", default="CartPole-v1", help="a Gymnasium env id with a Discrete action space")
    parser.add_argument("--seed", type=int, default=1, help="seed of the experiment")
    parser.add_argument("--torch-deterministic", action=argparse.BooleanOptionalAction, default=True)
    parser.add_argument("--total-timesteps", type=int, default=500_000, help="total env steps of the experiment")
    parser.add_argument("--learning-rate", type=float, default=2.5e-4, help="the optimizer's learning rate")
    parser.add_argument("--num-envs", type=int, default=4, help="number of parallel envs")
    parser.add_argument("--num-steps", type=int, default=128, help="steps per env per rollout")
    parser.add_argument("--n-workers", type=int, default=None, help="vecenv worker processes (default: one per core)")
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
    args = parser.parse_args(argv)
    args.batch_size = int(args.num_envs * args.num_steps)
    args.num_iterations = max(1, args.total_timesteps // args.batch_size)
    return args


def make_env(env_id: str) -> Callable[[], gym.Env]:
    def thunk() -> gym.Env:
        env = gym.make(env_id)
        return gym.wrappers.RecordEpisodeStatistics(env)

    return thunk


def layer_init(layer: nn.Linear, std: float = np.sqrt(2), bias_const: float = 0.0) -> nn.Linear:
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    """The actor and the critic, for one env's (one agent's) observation space and Discrete action space."""

    def __init__(self, observation_space: gym.spaces.Space, action_space: gym.spaces.Discrete) -> None:
        super().__init__()
        obs_dim = int(np.prod(observation_space.shape))
        n_actions = int(action_space.n)
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0),
        )
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01),
        )

    def get_value(self, x: torch.Tensor) -> torch.Tensor:
        return self.critic(x)

    def get_action_and_value(
        self, x: torch.Tensor, action: torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def compute_returns(
    agent: Agent,
    next_obs: torch.Tensor,
    next_done: torch.Tensor,
    rewards: torch.Tensor,
    dones: torch.Tensor,
    values: torch.Tensor,
    args: argparse.Namespace,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The advantages (GAE) and returns of a rollout ``(num_steps, num_envs)``, bootstrapped from ``next_obs``."""
    with torch.no_grad():
        next_value = agent.get_value(next_obs).reshape(1, -1)
        advantages = torch.zeros_like(rewards)
        lastgaelam = torch.zeros(rewards.shape[1])
        for t in reversed(range(args.num_steps)):
            if t == args.num_steps - 1:
                nextnonterminal = 1.0 - next_done
                nextvalues = next_value
            else:
                nextnonterminal = 1.0 - dones[t + 1]
                nextvalues = values[t + 1]
            delta = rewards[t] + args.gamma * nextvalues * nextnonterminal - values[t]
            advantages[t] = lastgaelam = delta + args.gamma * args.gae_lambda * nextnonterminal * lastgaelam
    return advantages, advantages + values


def update_policy(
    agent: Agent,
    optimizer: optim.Optimizer,
    rollout: tuple[torch.Tensor, ...],
    b_inds: np.ndarray,
    args: argparse.Namespace,
) -> tuple[torch.Tensor, list[float]]:
    """PPO's update epochs on the samples ``b_inds`` of the flattened ``rollout`` (obs, logprobs, actions,
    advantages, returns, values; each ``(num_steps, num_envs, ...)``); returns the last approx. KL and the clip
    fractions."""
    obs, logprobs, actions, advantages, returns, values = rollout
    # flatten the batch
    b_obs = obs.reshape((-1, *obs.shape[2:]))
    b_logprobs = logprobs.reshape(-1)
    b_actions = actions.reshape((-1, *actions.shape[2:]))
    b_advantages = advantages.reshape(-1)
    b_returns = returns.reshape(-1)
    b_values = values.reshape(-1)

    minibatch_size = max(1, len(b_inds) // args.num_minibatches)
    clipfracs: list[float] = []
    approx_kl = torch.zeros(())
    for _epoch in range(args.update_epochs):
        np.random.shuffle(b_inds)
        for start in range(0, len(b_inds), minibatch_size):
            mb_inds = b_inds[start : start + minibatch_size]

            _, newlogprob, entropy, newvalue = agent.get_action_and_value(b_obs[mb_inds], b_actions.long()[mb_inds])
            logratio = newlogprob - b_logprobs[mb_inds]
            ratio = logratio.exp()

            with torch.no_grad():
                approx_kl = ((ratio - 1) - logratio).mean()
                clipfracs += [((ratio - 1.0).abs() > args.clip_coef).float().mean().item()]

            mb_advantages = b_advantages[mb_inds]
            if args.norm_adv:
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)

            pg_loss1 = -mb_advantages * ratio
            pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - args.clip_coef, 1 + args.clip_coef)
            pg_loss = torch.max(pg_loss1, pg_loss2).mean()

            newvalue = newvalue.view(-1)
            if args.clip_vloss:
                v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                v_clipped = b_values[mb_inds] + torch.clamp(
                    newvalue - b_values[mb_inds], -args.clip_coef, args.clip_coef
                )
                v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
            else:
                v_loss = 0.5 * ((newvalue - b_returns[mb_inds]) ** 2).mean()

            entropy_loss = entropy.mean()
            loss = pg_loss - args.ent_coef * entropy_loss + v_loss * args.vf_coef

            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(agent.parameters(), args.max_grad_norm)
            optimizer.step()

        if args.target_kl is not None and approx_kl > args.target_kl:
            break
    return approx_kl, clipfracs


def report_episodes(infos: dict[str, Any], global_step: int, returns: list[float]) -> None:
    """Print the episodes that ended in this step (SAME_STEP mode: their statistics are in ``final_info``)."""
    final_info = infos.get("final_info")
    if not final_info or "episode" not in final_info:
        return
    episode = final_info["episode"]
    for i in np.flatnonzero(final_info["_episode"]):
        returns.append(float(episode["r"][i]))
        print(f"global_step={global_step}, episodic_return={episode['r'][i]:.1f}, episodic_length={episode['l'][i]}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    torch.backends.cudnn.deterministic = args.torch_deterministic
    device = torch.device("cpu")

    envs = AsyncVectorEnv(
        [make_env(args.env_id) for _ in range(args.num_envs)],
        autoreset_mode=gym.vector.AutoresetMode.SAME_STEP,
        n_workers=args.n_workers,
    )
    assert isinstance(envs.single_action_space, gym.spaces.Discrete), "only discrete action spaces are supported"
    try:
        agent = Agent(envs.single_observation_space, envs.single_action_space).to(device)
        optimizer = optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)

        obs = torch.zeros((args.num_steps, args.num_envs, *envs.single_observation_space.shape)).to(device)
        actions = torch.zeros((args.num_steps, args.num_envs, *envs.single_action_space.shape)).to(device)
        logprobs = torch.zeros((args.num_steps, args.num_envs)).to(device)
        rewards = torch.zeros((args.num_steps, args.num_envs)).to(device)
        dones = torch.zeros((args.num_steps, args.num_envs)).to(device)
        values = torch.zeros((args.num_steps, args.num_envs)).to(device)

        global_step = 0
        start_time = time.time()
        returns: list[float] = []
        next_obs_np, _ = envs.reset(seed=args.seed)
        next_obs = torch.Tensor(next_obs_np).to(device)
        next_done = torch.zeros(args.num_envs).to(device)

        for iteration in range(1, args.num_iterations + 1):
            if args.anneal_lr:
                frac = 1.0 - (iteration - 1.0) / args.num_iterations
                optimizer.param_groups[0]["lr"] = frac * args.learning_rate

            for step in range(args.num_steps):
                global_step += args.num_envs
                obs[step] = next_obs
                dones[step] = next_done

                with torch.no_grad():
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                    values[step] = value.flatten()
                actions[step] = action
                logprobs[step] = logprob

                next_obs_np, reward, terminations, truncations, infos = envs.step(action.cpu().numpy())
                next_done_np = np.logical_or(terminations, truncations)
                rewards[step] = torch.tensor(reward).to(device).view(-1)
                next_obs = torch.Tensor(next_obs_np).to(device)
                next_done = torch.Tensor(next_done_np).to(device)
                report_episodes(infos, global_step, returns)

            advantages, returns_t = compute_returns(agent, next_obs, next_done, rewards, dones, values, args)
            approx_kl, clipfracs = update_policy(
                agent,
                optimizer,
                (obs, logprobs, actions, advantages, returns_t, values),
                np.arange(args.batch_size),
                args,
            )

            sps = int(global_step / (time.time() - start_time))
            print(
                f"iteration={iteration}/{args.num_iterations} global_step={global_step} SPS={sps} "
                f"approx_kl={approx_kl.item():.4f} clipfrac={np.mean(clipfracs):.3f}"
            )
        recent = returns[-10:]
        mean_recent = float(np.mean(recent)) if recent else float("nan")
        print(f"finished episodes: {len(returns)} (mean return of the last 10: {mean_recent:.1f})")
    finally:
        envs.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
