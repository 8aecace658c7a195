"""Which channel between parent and workers steps a bare multiprocess prototype fastest, in ONE process.

The prototype of benchmarks/prototype_gap.py (2 workers x 32 CartPoles, observations and actions in shared
memory, one small message each way per step) is built once per channel kind, and the kinds run in
interleaved rounds so machine drift hits all alike; each is reported as its paired median ratio to raw
pipes. This is the measurement behind SubprocVecEnv's two one-way pipes (docs/performance.md):

- ``pipe``: ``os.write`` / ``os.read`` of one byte on two ``os.pipe()`` per worker;
- ``pipe-framed``: the same pipes with a 4-byte length header, one ``read(2)`` per message (vecenv);
- ``conn-simplex``: ``multiprocessing.Pipe(duplex=False)`` x 2, ``send_bytes`` / ``recv_bytes``;
- ``socket``: ``os.write`` / ``os.read`` of one byte on a ``socket.socketpair()``;
- ``conn-duplex``: ``multiprocessing.Pipe()`` (a Unix socket pair), what SB3 and Gymnasium use.

    python benchmarks/transport.py --rounds 9
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import socket
from collections.abc import Callable
from multiprocessing import shared_memory
from typing import Any

import numpy as np
from prototype_gap import prototype_worker, rate  # same directory: run as python benchmarks/transport.py

KINDS = ["pipe", "pipe-framed", "conn-simplex", "socket", "conn-duplex"]
Channel = tuple[Callable[[bytes], Any], Callable[[], bytes]]  # (send, receive)


def _framed_read(fd: int) -> bytes:
    return os.read(fd, 5)[4:]  # the messages here are one byte: header and body in one read


def _framed_write(fd: int, data: bytes) -> None:
    os.write(fd, len(data).to_bytes(4, "big") + data)


def channels(kind: str, ctx: Any) -> tuple[Channel, Channel]:
    """``(worker_side, parent_side)`` channel of one worker, each as ``(send, receive)``."""
    if kind in ("pipe", "pipe-framed"):
        r1, w1 = os.pipe()
        r2, w2 = os.pipe()
        if kind == "pipe":
            return (lambda d: os.write(w2, d), lambda: os.read(r1, 1)), (
                lambda d: os.write(w1, d),
                lambda: os.read(r2, 1),
            )
        return (lambda d: _framed_write(w2, d), lambda: _framed_read(r1)), (
            lambda d: _framed_write(w1, d),
            lambda: _framed_read(r2),
        )
    if kind == "socket":
        a, b = socket.socketpair()
        fa, fb = a.detach(), b.detach()
        return (lambda d: os.write(fb, d), lambda: os.read(fb, 1)), (lambda d: os.write(fa, d), lambda: os.read(fa, 1))
    if kind == "conn-duplex":
        parent, child = ctx.Pipe()
        return (child.send_bytes, child.recv_bytes), (parent.send_bytes, parent.recv_bytes)
    r1, w1 = ctx.Pipe(duplex=False)
    r2, w2 = ctx.Pipe(duplex=False)
    return (w2.send_bytes, r1.recv_bytes), (w1.send_bytes, r2.recv_bytes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-envs", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--seconds", type=float, default=1.0, help="duration of each kind in each round")
    args = parser.parse_args()
    n, workers = args.num_envs, 2
    ctx = mp.get_context("fork")
    rng = np.random.default_rng(0)
    actions = [rng.integers(0, 2, n) for _ in range(16)]
    blocks, steps, processes = [], {}, []
    counter = [0]
    for kind in KINDS:
        shm = shared_memory.SharedMemory(create=True, size=n * 24)
        blocks.append(shm)
        parent_sides = []
        for k in range(workers):
            (send, receive), parent_side = channels(kind, ctx)
            process = ctx.Process(target=prototype_worker, args=(k, n, workers, shm.name, receive, send), daemon=True)
            process.start()
            processes.append(process)
            parent_sides.append(parent_side)
        for _, receive in parent_sides:
            receive()
        act = np.ndarray((n,), np.int64, shm.buf[n * 16 :])
        obs = np.ndarray((n, 4), np.float32, shm.buf)

        def step(sides: list[Channel] = parent_sides, act: np.ndarray = act, obs: np.ndarray = obs) -> None:
            counter[0] += 1
            act[:] = actions[counter[0] % 16]
            for send, _ in sides:
                send(b"s")
            for _, receive in sides:
                receive()
            obs.copy()

        steps[kind] = step
    results: dict[str, list[float]] = {kind: [] for kind in KINDS}
    for _ in range(args.rounds):
        for kind, step in steps.items():
            results[kind].append(rate(step, n, args.seconds))
    base = np.array(results["pipe"])
    print(f"{'channel':14s} {'env-steps/s':>12s}  paired ratio to raw pipes (median of {args.rounds} rounds)")
    for kind, values in results.items():
        print(f"{kind:14s} {np.median(values):12,.0f}  {np.median(np.array(values) / base):.2f}")
    for process in processes:
        process.kill()
        process.join()
    for shm in blocks:
        shm.unlink()


if __name__ == "__main__":
    main()
