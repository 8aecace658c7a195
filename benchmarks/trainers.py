"""End to end: vector envs inside real trainers, timed over whole training runs, in ONE process, paired.

A vector env is judged inside a trainer: the trainer's own compute (policy forward passes, gradient steps) runs
between the steps, so a vector env that is twice as fast on its own saves only its share of the wall time. This
script trains, in rounds, with every vector env of a case and reports for each:

- ``learn s``: the wall time of ``model.learn(total_timesteps)`` (the CleanRL loop: of its whole training loop),
  building the vector env and the model excluded (``startup s`` is the vector env's construction);
- ``env-steps/s``: the env-steps the timing wrapper counted (one per env per vector step) over ``learn s``;
- ``x ref``: env-steps/s over the case's reference's in the same round (SB3's ``DummyVecEnv``, SB3's default, for
  the SB3 cases; Gymnasium's ``SyncVectorEnv``, CleanRL's, for the CleanRL loop): the median over rounds and the
  spread (min..max) of the per-round ratios;
- ``step share``: the part of ``learn s`` spent inside the vector env's ``step`` / ``step_async`` /
  ``step_wait`` (the instance's methods wrapped with ``time.perf_counter``; a call inside another of them is not
  counted twice), and ``step us``: that time per vector step;
- ``step x ref``: that time over the reference's in the same round (median over rounds): the vector envs' own
  time compared, without the trainer's compute, whose noise weighs on ``x ref``;
- ``episodes``: episodes that ended during the run (every vector env runs the same seeds, so equal counts are a
  check that they trained on the same trajectories).

Cases (``--cases``):

- ``cartpole-8``, ``cartpole-64``: SB3 ``PPO("MlpPolicy")`` on CartPole-v1 with 8 / 64 envs;
- ``pong-8``, ``pong-16``: SB3 ``PPO("CnnPolicy")`` on ``PongNoFrameskip-v4`` with 8 / 16 envs built as rl_zoo3 does
  (``make_atari_env``: ``Monitor`` then SB3's ``AtariWrapper`` per env), then SB3's ``VecFrameStack(4)``; PPO
  adds ``VecTransposeImage`` itself (needs ``ale-py``);
- ``cleanrl-8``: a CleanRL-style PPO loop (the structure of CleanRL's ``ppo.py``, plain torch) over 8 CartPole-v1
  in a Gymnasium vector env, stepped with ``envs.step(action.cpu().numpy())``.

The SB3 cases build their vector env with SB3's ``make_vec_env`` / ``make_atari_env`` and ``vec_env_cls`` among
SB3's ``DummyVecEnv`` / ``SubprocVecEnv`` and vecenv's ``DummyVecEnv`` / ``SubprocVecEnv`` (each with its
defaults), so only the vector env class differs. The CleanRL loop runs over Gymnasium's ``SyncVectorEnv`` /
``AsyncVectorEnv`` and ``vecenv.gymnasium``'s, all with their defaults (next-step autoreset, as CleanRL's loop
expects). Every run uses n_steps = 128, batch size 256 and 4 epochs, torch with one CPU thread, the policy on
``--device`` (SB3's ``device``; default ``cpu``; the CleanRL loop runs on the CPU only and is skipped on another),
and the same ``--seed``; a run's env-steps are ``--timesteps`` rounded up to whole rollouts of 128 x num_envs (as SB3's
``learn`` does). Before a case's rounds, an untimed run of one rollout with the reference warms torch up. Each
round runs every vector env once, the order rotated by one each round.

``--layouts '{"LABEL": {kwarg: value, ...}, ...}'`` adds, to every SB3 case, vecenv's ``SubprocVecEnv`` built with
those keyword arguments (``make_vec_env``'s ``vec_env_kwargs``) as the vector env ``vecenv-subproc:LABEL``: to
compare layouts (``n_workers``, ``parent_envs``, ``wait_mode``, ...) inside the trainer.

    python benchmarks/trainers.py --cases cartpole-8 --rounds 2 --timesteps 4096
    python benchmarks/trainers.py --cases cartpole-8,cartpole-64,cleanrl-8 --rounds 3 --timesteps 32768 \\
        --markdown trainers.md --json trainers.json
    python benchmarks/trainers.py --cases pong-8 --rounds 2 --timesteps pong-8=8192
    python benchmarks/trainers.py --cases pong-16 --device cuda --vec-envs sb3-subproc,vecenv-subproc
    python benchmarks/trainers.py --cases cartpole-64 --vec-envs vecenv-subproc \
        --layouts '{"w4": {"n_workers": 4}, "spin": {"wait_mode": "spin"}}'

torch and stable-baselines3 are imported when a case runs, never when this module is imported.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib
import importlib.util
import json
import math
import multiprocessing as mp
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from vecenv.bench.machine import cpu_model, cpus_usable, load_average, machine_info, vecenv_commit
from vecenv.bench.tables import render_markdown

#: PPO's rollout length per env, minibatch size and epochs, in every case
N_STEPS, BATCH_SIZE, N_EPOCHS = 128, 256, 4
SB3_VEC_ENVS = ("sb3-dummy", "sb3-subproc", "vecenv-dummy", "vecenv-subproc")
GYM_VEC_ENVS = ("gym-sync", "gym-async", "vecenv-gym-sync", "vecenv-gym-async")
COLUMNS = [
    "case",
    "vec env",
    "learn s",
    "env-steps/s",
    "x ref",
    "x ref min..max",
    "step share",
    "step us",
    "step x ref",
    "episodes",
    "startup s",
]
_RIGHT = [column not in ("case", "vec env") for column in COLUMNS]  # text columns left, figures right


@dataclass(frozen=True)
class TrainerCase:
    """A trainer on ``num_envs`` copies of ``env_id``, over each of ``vec_envs`` (the first is the reference).

    :param trainer: ``"sb3"`` (SB3's PPO with ``policy``) or ``"cleanrl"`` (the CleanRL-style loop).
    :param env_id: the Gymnasium id (``"module:id"`` makes every process import ``module`` first).
    :param num_envs: envs per vector env.
    :param vec_envs: the vector envs compared, the reference first.
    :param timesteps: ``total_timesteps`` when ``--timesteps`` does not name this case.
    :param policy: SB3's policy name.
    :param atari: build with ``make_atari_env`` and stack 4 frames.
    :param ppo_kwargs: further PPO arguments (rl_zoo3's for Atari).
    :param needs: importable modules the case needs.
    """

    trainer: str
    env_id: str
    num_envs: int
    vec_envs: tuple[str, ...]
    timesteps: int
    policy: str = "MlpPolicy"
    atari: bool = False
    ppo_kwargs: dict[str, float] = field(default_factory=dict)
    needs: tuple[str, ...] = ("torch", "stable_baselines3")


CASES: dict[str, TrainerCase] = {
    "cartpole-8": TrainerCase("sb3", "CartPole-v1", 8, SB3_VEC_ENVS, 32768),
    "cartpole-64": TrainerCase("sb3", "CartPole-v1", 64, SB3_VEC_ENVS, 32768),
    **{
        f"pong-{n}": TrainerCase(
            "sb3",
            "ale_py:PongNoFrameskip-v4",
            n,
            SB3_VEC_ENVS,
            8192,
            policy="CnnPolicy",
            atari=True,
            ppo_kwargs={"learning_rate": 2.5e-4, "clip_range": 0.1, "ent_coef": 0.01, "vf_coef": 0.5},
            needs=("torch", "stable_baselines3", "ale_py"),
        )
        for n in (8, 16)
    },
    "cleanrl-8": TrainerCase("cleanrl", "CartPole-v1", 8, GYM_VEC_ENVS, 32768, needs=("torch",)),
}
_INSTALL = {
    "torch": "torch not installed (pip install torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu)",
    "stable_baselines3": "stable-baselines3 not installed (pip install stable-baselines3)",
    "ale_py": "ale-py not installed (pip install ale-py)",
}


def _module(name: str) -> Any:
    """The optional module ``name`` (torch, stable-baselines3 and their parts), imported now."""
    return importlib.import_module(name)


def rollout_steps(case: TrainerCase, timesteps: int) -> int:
    """The env-steps a run of ``timesteps`` takes: whole rollouts of ``N_STEPS * num_envs``, at least one."""
    per_rollout = N_STEPS * case.num_envs
    return max(1, math.ceil(timesteps / per_rollout)) * per_rollout


class StepTimer:
    """Times a vector env instance's ``step``, ``step_async`` and ``step_wait`` (those it has) by replacing them
    on the instance with wrappers that add their ``time.perf_counter`` durations to :attr:`seconds`.

    A call made inside another wrapped call of the same instance (``step`` calling ``step_async``) runs
    unwrapped, so no time is counted twice. ``step`` and ``step_wait`` count one vector step each and the
    episodes that ended in it (SB3: ``dones``; Gymnasium: ``terminations | truncations``), after the clock stops.

    :param venv: the vector env; its class is untouched, only this instance's attributes change.
    """

    def __init__(self, venv: Any) -> None:
        self.seconds = 0.0
        self.vector_steps = 0
        self.episodes = 0
        self._inside = False
        for name, counts in (("step", True), ("step_async", False), ("step_wait", True)):
            method = getattr(venv, name, None)
            if method is not None:
                setattr(venv, name, self._timed(method, counts))

    def _timed(self, method: Callable[..., Any], counts: bool) -> Callable[..., Any]:
        clock = time.perf_counter

        def timed(*args: Any, **kwargs: Any) -> Any:
            if self._inside:
                return method(*args, **kwargs)
            self._inside = True
            start = clock()
            try:
                result = method(*args, **kwargs)
            finally:
                self.seconds += clock() - start
                self._inside = False
            if counts:
                self.vector_steps += 1
                ended = result[2] if len(result) == 4 else np.logical_or(result[2], result[3])
                self.episodes += int(np.count_nonzero(ended))
            return result

        return timed


def timer_overhead_us(calls: int = 20000) -> float:
    """Microseconds that :class:`StepTimer` adds to one vector step: a wrapped no-op ``step`` (returning SB3's
    4-tuple for 8 envs) against the bare one, the best of 5 repeats of ``calls`` calls each."""
    result: tuple[Any, ...] = (np.zeros((8, 4)), np.zeros(8, np.float32), np.zeros(8, bool), [{}] * 8)

    class Bare:
        def step(self, actions: Any) -> Any:
            return result

    def best(venv: Any) -> float:
        times = []
        for _ in range(5):
            start = time.perf_counter()
            for _ in range(calls):
                venv.step(None)
            times.append(time.perf_counter() - start)
        return min(times) / calls

    bare, wrapped = Bare(), Bare()
    StepTimer(wrapped)
    return max(0.0, best(wrapped) - best(bare)) * 1e6


def sb3_vec_env_class(name: str) -> Any:
    """The class of vector env ``name`` among :data:`SB3_VEC_ENVS` (or ``vecenv-subproc:LABEL``)."""
    library, _, kind = name.partition(":")[0].partition("-")
    module = _module("stable_baselines3.common.vec_env" if library == "sb3" else "vecenv")
    return getattr(module, {"dummy": "DummyVecEnv", "subproc": "SubprocVecEnv"}[kind])


def run_sb3(
    case: TrainerCase,
    vec_env: str,
    timesteps: int,
    seed: int,
    device: str = "cpu",
    vec_env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build ``vec_env`` as SB3's ``make_vec_env`` / ``make_atari_env`` do (passing them ``vec_env_kwargs``), then
    time ``PPO(...).learn`` with the policy on torch device ``device``.

    :return: ``learn_s``, ``startup_s`` (the vector env's construction, seconds), ``step_s``, ``vector_steps``,
        ``env_steps``, ``episodes`` (from the :class:`StepTimer`) and ``trainer_timesteps`` (PPO's own count).
    """
    env_util = _module("stable_baselines3.common.env_util")
    ppo_class = _module("stable_baselines3").PPO
    vec_env_cls = sb3_vec_env_class(vec_env)
    start = time.perf_counter()
    if case.atari:
        venv = env_util.make_atari_env(
            case.env_id, n_envs=case.num_envs, seed=seed, vec_env_cls=vec_env_cls, vec_env_kwargs=vec_env_kwargs
        )
        outer = _module("stable_baselines3.common.vec_env").VecFrameStack(venv, n_stack=4)
    else:
        venv = outer = env_util.make_vec_env(
            case.env_id, n_envs=case.num_envs, seed=seed, vec_env_cls=vec_env_cls, vec_env_kwargs=vec_env_kwargs
        )
    startup = time.perf_counter() - start
    try:
        timer = StepTimer(venv)
        model = ppo_class(
            case.policy,
            outer,
            n_steps=N_STEPS,
            batch_size=BATCH_SIZE,
            n_epochs=N_EPOCHS,
            seed=seed,
            device=device,
            verbose=0,
            **case.ppo_kwargs,
        )
        start = time.perf_counter()
        model.learn(total_timesteps=timesteps)
        learn = time.perf_counter() - start
        trainer_timesteps = int(model.num_timesteps)
    finally:
        outer.close()
    return _run_record(timer, case, learn, startup, trainer_timesteps)


def _run_record(timer: StepTimer, case: TrainerCase, learn: float, startup: float, steps: int) -> dict[str, Any]:
    return {
        "learn_s": learn,
        "startup_s": startup,
        "step_s": timer.seconds,
        "vector_steps": timer.vector_steps,
        "env_steps": timer.vector_steps * case.num_envs,
        "episodes": timer.episodes,
        "trainer_timesteps": steps,
    }


def cleanrl_env_fn(env_id: str) -> Callable[[], Any]:
    """CleanRL's ``make_env`` thunk: ``gym.make(env_id)`` in ``RecordEpisodeStatistics``."""

    def thunk() -> Any:
        import gymnasium as gym

        return gym.wrappers.RecordEpisodeStatistics(gym.make(env_id))

    return thunk


def gym_vector_env(name: str, env_fns: list[Callable[[], Any]]) -> Any:
    """Vector env ``name`` among :data:`GYM_VEC_ENVS`, with its defaults."""
    import gymnasium as gym

    import vecenv.gymnasium as vgym

    library = vgym if name.startswith("vecenv-") else gym.vector
    cls = library.SyncVectorEnv if name.endswith("-sync") else library.AsyncVectorEnv
    return cls(env_fns)


def cleanrl_ppo(envs: Any, total_timesteps: int, seed: int) -> int:
    """Train a CleanRL-style PPO on the discrete-action Gymnasium vector env ``envs``: the structure and defaults
    of CleanRL's ``ppo.py`` (an orthogonally initialised 64-64 tanh actor and critic, Adam with an annealed
    learning rate of 2.5e-4, GAE with gamma 0.99 and lambda 0.95, 4 minibatches, clipped policy and value losses,
    gradient norm 0.5), with ``N_STEPS`` steps per rollout and ``N_EPOCHS`` epochs; the number of rollouts is
    ``total_timesteps`` over the rollout's env-steps, rounded up.

    :param envs: a Gymnasium vector env with a ``Discrete`` single action space and a flat observation space.
    :param total_timesteps: env-steps asked for.
    :param seed: seeds torch, the minibatch shuffling and ``envs.reset``.
    :return: the env-steps taken (CleanRL's ``global_step``).
    """
    torch = _module("torch")
    nn = torch.nn
    categorical = _module("torch.distributions.categorical").Categorical
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    num_envs = envs.num_envs
    obs_shape = envs.single_observation_space.shape
    batch_size = num_envs * N_STEPS
    minibatch_size = batch_size // 4
    num_iterations = max(1, math.ceil(total_timesteps / batch_size))
    gamma, gae_lambda, clip_coef, ent_coef, vf_coef, lr = 0.99, 0.95, 0.2, 0.01, 0.5, 2.5e-4

    def layer_init(layer: Any, std: float = math.sqrt(2), bias_const: float = 0.0) -> Any:
        nn.init.orthogonal_(layer.weight, std)
        nn.init.constant_(layer.bias, bias_const)
        return layer

    def mlp(out: int, std: float) -> Any:
        width = int(np.prod(obs_shape))
        return nn.Sequential(
            layer_init(nn.Linear(width, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, 64)),
            nn.Tanh(),
            layer_init(nn.Linear(64, out), std=std),
        )

    critic, actor = mlp(1, 1.0), mlp(int(envs.single_action_space.n), 0.01)
    params = [*critic.parameters(), *actor.parameters()]
    optimizer = torch.optim.Adam(params, lr=lr, eps=1e-5)

    def action_and_value(x: Any, action: Any = None) -> tuple[Any, Any, Any, Any]:
        probs = categorical(logits=actor(x))
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), critic(x)

    obs = torch.zeros((N_STEPS, num_envs, *obs_shape))
    actions = torch.zeros((N_STEPS, num_envs))
    logprobs, rewards, dones, values = (torch.zeros((N_STEPS, num_envs)) for _ in range(4))
    global_step = 0
    next_obs_np, _ = envs.reset(seed=seed)
    next_obs, next_done = torch.Tensor(next_obs_np), torch.zeros(num_envs)
    for iteration in range(1, num_iterations + 1):
        optimizer.param_groups[0]["lr"] = (1.0 - (iteration - 1.0) / num_iterations) * lr
        for step in range(N_STEPS):
            global_step += num_envs
            obs[step] = next_obs
            dones[step] = next_done
            with torch.no_grad():
                action, logprob, _, value = action_and_value(next_obs)
                values[step] = value.flatten()
            actions[step] = action
            logprobs[step] = logprob
            next_obs_np, reward, terminations, truncations, _infos = envs.step(action.cpu().numpy())
            rewards[step] = torch.tensor(reward).view(-1)
            next_obs = torch.Tensor(next_obs_np)
            next_done = torch.Tensor(np.logical_or(terminations, truncations))
        with torch.no_grad():
            next_value = critic(next_obs).reshape(1, -1)
            advantages = torch.zeros_like(rewards)
            lastgaelam = 0.0
            for t in reversed(range(N_STEPS)):
                nextnonterminal = 1.0 - (next_done if t == N_STEPS - 1 else dones[t + 1])
                nextvalues = next_value if t == N_STEPS - 1 else values[t + 1]
                delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                advantages[t] = lastgaelam = delta + gamma * gae_lambda * nextnonterminal * lastgaelam
            returns = advantages + values
        b_obs = obs.reshape((-1, *obs_shape))
        b_logprobs, b_actions = logprobs.reshape(-1), actions.reshape(-1).long()
        b_advantages, b_returns, b_values = advantages.reshape(-1), returns.reshape(-1), values.reshape(-1)
        b_inds = np.arange(batch_size)
        for _epoch in range(N_EPOCHS):
            rng.shuffle(b_inds)
            for start in range(0, batch_size, minibatch_size):
                mb = b_inds[start : start + minibatch_size]
                _, newlogprob, entropy, newvalue = action_and_value(b_obs[mb], b_actions[mb])
                ratio = (newlogprob - b_logprobs[mb]).exp()
                mb_advantages = b_advantages[mb]
                mb_advantages = (mb_advantages - mb_advantages.mean()) / (mb_advantages.std() + 1e-8)
                pg_loss = torch.max(
                    -mb_advantages * ratio, -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
                ).mean()
                newvalue = newvalue.view(-1)
                v_clipped = b_values[mb] + torch.clamp(newvalue - b_values[mb], -clip_coef, clip_coef)
                v_loss = 0.5 * torch.max((newvalue - b_returns[mb]) ** 2, (v_clipped - b_returns[mb]) ** 2).mean()
                loss = pg_loss - ent_coef * entropy.mean() + v_loss * vf_coef
                optimizer.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(params, 0.5)
                optimizer.step()
    return global_step


def run_cleanrl(
    case: TrainerCase,
    vec_env: str,
    timesteps: int,
    seed: int,
    device: str = "cpu",
    vec_env_kwargs: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Build Gymnasium vector env ``vec_env`` over CleanRL's env thunks, then time :func:`cleanrl_ppo` on it (on
    the CPU; :func:`run_case` skips this trainer for another ``device``). ``vec_env_kwargs`` must be empty:
    ``--layouts`` applies to the SB3 cases only.

    :return: as :func:`run_sb3` (``trainer_timesteps``: the loop's ``global_step``).
    """
    if vec_env_kwargs:
        raise ValueError(f"vec_env_kwargs: the CleanRL loop takes none (got {vec_env_kwargs!r})")
    start = time.perf_counter()
    envs = gym_vector_env(vec_env, [cleanrl_env_fn(case.env_id) for _ in range(case.num_envs)])
    startup = time.perf_counter() - start
    try:
        timer = StepTimer(envs)
        start = time.perf_counter()
        steps = cleanrl_ppo(envs, timesteps, seed)
        learn = time.perf_counter() - start
    finally:
        envs.close()
    return _run_record(timer, case, learn, startup, steps)


_RUNNERS: dict[str, Callable[[TrainerCase, str, int, int, str, dict[str, Any] | None], dict[str, Any]]] = {
    "sb3": run_sb3,
    "cleanrl": run_cleanrl,
}


def rotations(names: Sequence[str], rounds: int) -> list[list[str]]:
    """The order of each round: ``names`` rotated left by the round's index (modulo ``len(names)``)."""
    return [[*names[r % len(names) :], *names[: r % len(names)]] for r in range(rounds)]


def run_case(name: str, case: TrainerCase, vec_envs: Sequence[str], args: argparse.Namespace) -> dict[str, Any]:
    """Every vector env of ``case`` in ``args.rounds`` rotated rounds (after a warm-up run of the reference).

    :return: ``{"case", "timesteps", "orders", "runs": {vec_env: [one record per round]}}``, or with ``skipped``
        (why) where a needed module is missing.
    """
    timesteps = args.timesteps.get(name, case.timesteps)
    record: dict[str, Any] = {
        "case": name,
        "timesteps": timesteps,
        "reference": vec_envs[0],
        "vec_envs": list(vec_envs),
    }
    missing = [module for module in case.needs if importlib.util.find_spec(module) is None]
    if missing or (case.trainer == "cleanrl" and args.device != "cpu"):
        record["skipped"] = (
            _INSTALL.get(missing[0], f"{missing[0]} not installed")
            if missing
            else f"the CleanRL loop runs on the CPU only (--device {args.device})"
        )
        print(f"{name}: skipped, {record['skipped']}", flush=True)
        return record
    run = _RUNNERS[case.trainer]
    if args.warmup:
        run(case, vec_envs[0], N_STEPS * case.num_envs, args.seed, args.device, None)
    record["orders"], record["runs"] = [], {v: [] for v in vec_envs}
    for r, order in enumerate(rotations(vec_envs, args.rounds)):
        record["orders"].append([])
        for vec_env in order:
            gc.collect()
            result = run(case, vec_env, timesteps, args.seed, args.device, args.layouts.get(vec_env.partition(":")[2]))
            record["orders"][-1].append(vec_env)
            record["runs"][vec_env].append(result)
            print(
                f"{name} round {r + 1}/{args.rounds} {vec_env}: learn {result['learn_s']:.2f} s, "
                f"{result['env_steps'] / result['learn_s']:,.0f} env-steps/s, "
                f"step share {result['step_s'] / result['learn_s']:.3f}",
                flush=True,
            )
    return record


def summarize(case_record: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per vector env of a case: the medians over rounds, and the ratios to the reference's runs of the
    same rounds (``ratios``, their median and min..max)."""
    name = case_record["case"]
    case = CASES[name]
    if "skipped" in case_record:
        return [{"case": name, "vec_env": v, "skipped": case_record["skipped"]} for v in case_record["vec_envs"]]
    runs = case_record["runs"]
    reference = case_record["reference"]

    def rates(vec_env: str) -> np.ndarray:
        return np.array([r["env_steps"] / r["learn_s"] for r in runs[vec_env]])

    def step_seconds(vec_env: str) -> np.ndarray:
        return np.array([r["step_s"] for r in runs[vec_env]])

    rows = []
    for vec_env, per_round in runs.items():
        ratios = rates(vec_env) / rates(reference)
        step_ratios = step_seconds(vec_env) / step_seconds(reference)
        learn = np.array([r["learn_s"] for r in per_round])
        shares = np.array([r["step_s"] / r["learn_s"] for r in per_round])
        rows.append(
            {
                "case": name,
                "vec_env": vec_env,
                "reference": reference,
                "trainer": case.trainer,
                "env_id": case.env_id,
                "num_envs": case.num_envs,
                "timesteps": case_record["timesteps"],
                "learn_s": float(np.median(learn)),
                "rate": float(np.median(rates(vec_env))),
                "ratio": float(np.median(ratios)),
                "ratio_min": float(ratios.min()),
                "ratio_max": float(ratios.max()),
                "step_share": float(np.median(shares)),
                "step_us": float(np.median([r["step_s"] / r["vector_steps"] * 1e6 for r in per_round])),
                "step_ratio": float(np.median(step_ratios)),
                "step_ratios": step_ratios.tolist(),
                "startup_s": float(np.median([r["startup_s"] for r in per_round])),
                "ratios": ratios.tolist(),
                "rounds": per_round,
            }
        )
    return rows


def table_rows(rows: Sequence[dict[str, Any]]) -> list[list[str]]:
    """The Markdown table's cells, one row per (case, vector env)."""
    cells = []
    for row in rows:
        if "skipped" in row:
            cells.append([row["case"], row["vec_env"], "skipped", row["skipped"], *[""] * (len(COLUMNS) - 4)])
            continue
        episodes = sorted({r["episodes"] for r in row["rounds"]})
        cells.append(
            [
                row["case"],
                row["vec_env"],
                f"{row['learn_s']:.2f}",
                f"{row['rate']:,.0f}",
                f"{row['ratio']:.3f}",
                f"{row['ratio_min']:.2f}..{row['ratio_max']:.2f}",
                f"{row['step_share']:.3f}",
                f"{row['step_us']:.0f}",
                f"{row['step_ratio']:.3f}",
                "/".join(str(e) for e in episodes),
                f"{row['startup_s']:.2f}",
            ]
        )
    return cells


def case_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """Per case: its reference, env-steps per run, and whether every vector env ran the same episodes."""
    lines = []
    for record in records:
        if "skipped" in record:
            lines.append(f"- {record['case']}: skipped, {record['skipped']}")
            continue
        episodes = {r["episodes"] for runs in record["runs"].values() for r in runs}
        steps = {r["env_steps"] for runs in record["runs"].values() for r in runs}
        if episodes == {0}:
            same = "no episode ended in any run (the episode check says nothing here)"
        elif len(episodes) == 1:
            same = "the same episodes in every run"
        else:
            same = "episode counts differ between runs"
        lines.append(
            f"- {record['case']}: reference {record['reference']}; --timesteps {record['timesteps']}, "
            f"{'/'.join(str(s) for s in sorted(steps))} env-steps per run; {same}; orders "
            + ", ".join("[" + " ".join(order) + "]" for order in record["orders"])
        )
    return lines


def parse_timesteps(text: str) -> dict[str, int]:
    """``"32768"`` (every case) or ``"cartpole-8=32768,pong-8=8192"`` -> ``{case: timesteps}``.

    :raises argparse.ArgumentTypeError: for an unknown case or a count that is not a positive integer.
    """
    if text.isdigit() and int(text) > 0:
        return dict.fromkeys(CASES, int(text))
    out = {}
    for item in filter(None, text.split(",")):
        name, _, value = item.partition("=")
        if name not in CASES or not value.isdigit() or int(value) < 1:
            raise argparse.ArgumentTypeError(
                f"--timesteps expects a positive integer or case=count pairs with cases among {', '.join(CASES)} "
                f"(got {item!r})"
            )
        out[name] = int(value)
    return out


def parse_layouts(text: str) -> dict[str, dict[str, Any]]:
    """``'{"w4": {"n_workers": 4}}'`` -> ``{"w4": {"n_workers": 4}}``: labels and vecenv ``SubprocVecEnv`` keyword
    arguments.

    :raises argparse.ArgumentTypeError: for text that is not JSON, or not an object of objects keyed by labels of
        letters, digits, ``_`` and ``-``.
    """
    try:
        layouts = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"--layouts expects a JSON object (got {text!r}: {error})") from None
    if not isinstance(layouts, dict) or not all(
        isinstance(kwargs, dict) and label and all(c.isalnum() or c in "_-" for c in label)
        for label, kwargs in layouts.items()
    ):
        raise argparse.ArgumentTypeError(
            '--layouts expects {"LABEL": {keyword: value, ...}, ...} with labels of letters, digits, _ and - '
            f"(got {text!r})"
        )
    return layouts


def picked(text: str, allowed: Sequence[str], option: str) -> list[str]:
    """The comma-separated names of ``text``, each checked against ``allowed``.

    :raises SystemExit: naming ``option``, the unknown name and the allowed ones.
    """
    names = [name for name in text.split(",") if name]
    for name in names:
        if name not in allowed:
            raise SystemExit(f"{option}: unknown name {name!r} (expected among {', '.join(allowed)})")
    return names


def parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, among {', '.join(CASES)}")
    p.add_argument("--rounds", type=int, default=3, help="rounds; each runs every vector env once")
    p.add_argument(
        "--timesteps",
        type=parse_timesteps,
        default={},
        help="total_timesteps of a run: one count for every case, or case=count pairs (defaults: "
        + ", ".join(f"{k}={c.timesteps}" for k, c in CASES.items())
        + ")",
    )
    p.add_argument(
        "--vec-envs",
        default="",
        help="only these vector envs (the case's reference always runs); among "
        + ", ".join((*SB3_VEC_ENVS, *GYM_VEC_ENVS)),
    )
    p.add_argument(
        "--layouts",
        type=parse_layouts,
        default={},
        help='JSON {"LABEL": {keyword: value, ...}}: each adds vecenv-subproc:LABEL, vecenv\'s SubprocVecEnv with '
        "those keyword arguments, to every SB3 case",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu", help="torch device of the SB3 cases' policy (cpu, cuda, cuda:1, ...)")
    p.add_argument("--warmup", action=argparse.BooleanOptionalAction, default=True, help="untimed reference run")
    p.add_argument("--markdown", help="also write the report (Markdown) here")
    p.add_argument("--json", help="also write the settings, machine and every run (JSON) here")
    return p


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the cases, print the report; return ``{"text", "settings", "machine", "timer_overhead_us", "cases",
    "rows"}`` (``rows``: one per (case, vector env), every round's run included)."""
    args = parser().parse_args(argv)
    if args.rounds < 1:
        raise SystemExit(f"--rounds: expected at least 1 (got {args.rounds})")
    names = picked(args.cases, list(CASES), "--cases")
    only = picked(args.vec_envs, [*SB3_VEC_ENVS, *GYM_VEC_ENVS], "--vec-envs")
    if importlib.util.find_spec("torch") is not None:
        _module("torch").set_num_threads(1)
    # the forkserver preloads what a training script imports at its top, as it would preload that script
    preload = ["stable_baselines3"] if importlib.util.find_spec("stable_baselines3") is not None else ["torch"]
    mp.set_forkserver_preload(["gymnasium", *(m for m in preload if importlib.util.find_spec(m) is not None)])
    info = machine_info()
    overhead = timer_overhead_us()
    records = []
    for name in names:
        case = CASES[name]
        vec_envs = [v for v in case.vec_envs if not only or v in only or v == case.vec_envs[0]]
        if case.trainer == "sb3":
            vec_envs += [f"vecenv-subproc:{label}" for label in args.layouts]
        records.append(run_case(name, case, vec_envs, args))
    rows = [row for record in records for row in summarize(record)]
    info["load_average_end"] = load_average()
    cores = cpus_usable() or os.cpu_count() or 1
    text = "\n".join(
        [
            "# Vector envs inside trainers: " + ", ".join(names),
            "",
            f"Machine: {cores} usable cores ({os.cpu_count()} CPUs), {cpu_model()}, {info['python']}; torch "
            f"{info['torch']} (policy on {args.device}, 1 CPU thread), stable-baselines3 {info['stable_baselines3']}, "
            f"gymnasium {info['gymnasium']}; date {dt.datetime.now(dt.timezone.utc).isoformat(timespec='seconds')}; "
            f"vecenv commit {vecenv_commit()}; load average (1, 5, 15 min) {info['load_average_start']} at the start, "
            f"{info['load_average_end']} at the end.",
            f"{args.rounds} rounds, each running every vector env once (order rotated each round), seed "
            f"{args.seed}; PPO n_steps {N_STEPS}, batch size {BATCH_SIZE}, {N_EPOCHS} epochs. `learn s`: wall time "
            "of learn() (median over rounds); `env-steps/s`: env-steps over it; `x ref`: median of the per-round "
            "ratios of env-steps/s to the reference's; `step share`: time inside the vector env's step over "
            f"learn s; `step us`: that time per vector step; `step x ref`: median of the per-round ratios of that "
            f"time to the reference's; the step timer adds {overhead:.2f} us per vector step.",
            "",
            render_markdown(COLUMNS, table_rows(rows), _RIGHT),
            "",
            *case_lines(records),
        ]
    )
    print(text)
    settings = {
        "cases": names,
        "rounds": args.rounds,
        "seed": args.seed,
        "warmup": args.warmup,
        "n_steps": N_STEPS,
        "batch_size": BATCH_SIZE,
        "n_epochs": N_EPOCHS,
        "torch_threads": 1,
        "device": args.device,
        "layouts": args.layouts,
    }
    result = {
        "text": text,
        "settings": settings,
        "machine": info,
        "timer_overhead_us": overhead,
        "cases": [{k: v for k, v in r.items() if k != "runs"} for r in records],
        "rows": rows,
    }
    if args.markdown:
        with open(args.markdown, "w", encoding="utf-8") as handle:
            handle.write(text + "\n")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({k: v for k, v in result.items() if k != "text"}, handle, indent=1)
    return result


if __name__ == "__main__":
    main()
