"""The worker pipes' framing (vecenv.workers.subproc.read_message / write_message, and read_reply for the one
reply in a pipe) and the flag bookkeeping
of EnvGroup that the step replies rely on.

The framing must match multiprocessing.Connection's byte for byte (the shutdown path reads replies with
``Connection.recv_bytes``), never read past a message, and survive messages split across reads and
larger than a pipe's buffer.
"""

from __future__ import annotations

import contextlib
import os
import struct
import threading
import time
from collections.abc import Iterator
from multiprocessing.connection import Connection
from typing import Any

import numpy as np
import pytest

from tests.envs import CounterEnv
from vecenv import DummyVecEnv, SubprocVecEnv
from vecenv.env_group import EnvGroup
from vecenv.workers.pipes import read_reply
from vecenv.workers.subproc import frame, read_message, write_message


@pytest.fixture
def pipe() -> Iterator[tuple[int, int]]:
    r, w = os.pipe()
    yield r, w
    for fd in (r, w):
        with contextlib.suppress(OSError):
            os.close(fd)


def _write_in_chunks(fd: int, data: bytes, chunk: int, pause: float) -> threading.Thread:
    def run() -> None:
        for i in range(0, len(data), chunk):
            os.write(fd, data[i : i + chunk])
            time.sleep(pause)

    thread = threading.Thread(target=run)
    thread.start()
    return thread


@pytest.mark.parametrize("size", [1, 2, 5, 4096, 70_000, 300_000])
def test_round_trip_and_no_read_past_the_message(pipe: tuple[int, int], size: int) -> None:
    r, w = pipe
    payload = np.random.default_rng(size).integers(0, 256, size, dtype=np.uint8).tobytes()
    follower = b"next message"
    # larger than the pipe buffer: the writer blocks until the reader drains it
    thread = threading.Thread(target=lambda: (write_message(w, payload), write_message(w, follower)))
    thread.start()
    assert read_message(r) == payload
    assert read_message(r) == follower  # the first read took exactly its own message
    thread.join()


@pytest.mark.parametrize("size", [1, 3, 10_000])
def test_interoperates_with_multiprocessing_connection(pipe: tuple[int, int], size: int) -> None:
    r, w = pipe
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    writer, reader = Connection(os.dup(w), readable=False), Connection(os.dup(r), writable=False)
    try:
        thread = threading.Thread(target=writer.send_bytes, args=(payload,))
        thread.start()
        assert read_message(r) == payload
        thread.join()
        thread = threading.Thread(target=write_message, args=(w, payload))
        thread.start()
        assert reader.recv_bytes() == payload
        thread.join()
    finally:
        writer.close()
        reader.close()
    assert frame(payload) == struct.pack("!i", size) + payload


def test_empty_messages_are_refused() -> None:
    # read_message's first read asks for a header and one byte: an empty message would lose a byte of the next
    with pytest.raises(ValueError, match="never empty"):
        frame(b"")


def test_message_split_across_reads(pipe: tuple[int, int]) -> None:
    r, w = pipe
    data = frame(b"S") + frame(b"hello world")
    thread = _write_in_chunks(w, data, chunk=1, pause=0.001)  # header and body arrive byte by byte
    assert read_message(r) == b"S"
    assert read_message(r) == b"hello world"
    thread.join()


def test_eight_byte_length_header(pipe: tuple[int, int]) -> None:
    # messages over 2 GiB use Connection's -1 marker and an 8-byte length; the parser accepts any size there
    r, w = pipe
    os.write(w, struct.pack("!i", -1) + struct.pack("!Q", 6) + b"abcdef" + frame(b"x"))
    assert read_message(r) == b"abcdef"
    assert read_message(r) == b"x"


@pytest.mark.parametrize("read", [read_message, read_reply])
def test_closed_pipe_raises_eof(pipe: tuple[int, int], read: Any) -> None:
    r, w = pipe
    os.write(w, struct.pack("!i", 10) + b"abc")  # truncated: the writer dies mid-message
    os.close(w)
    with pytest.raises(EOFError):
        read(r)
    with pytest.raises(EOFError):
        read(r)


@pytest.mark.parametrize("size", [1, 2, 100, 4091, 4092, 4093, 70_000, 300_000])
def test_read_reply_reads_the_one_message_whatever_its_size(pipe: tuple[int, int], size: int) -> None:
    # 4092 bytes and the header fill the first read(2) exactly; over the pipe's buffer, the writer blocks until
    # the reader drains it
    r, w = pipe
    payload = bytes(range(256)) * (size // 256) + bytes(size % 256)
    thread = threading.Thread(target=write_message, args=(w, payload))
    thread.start()
    assert read_reply(r) == payload
    thread.join()


def test_read_reply_across_reads_and_with_the_eight_byte_header(pipe: tuple[int, int]) -> None:
    r, w = pipe
    thread = _write_in_chunks(w, frame(b"hello world"), chunk=1, pause=0.001)  # header and body byte by byte
    assert read_reply(r) == b"hello world"
    thread.join()
    thread = _write_in_chunks(w, struct.pack("!i", -1) + struct.pack("!Q", 6) + b"abcdef", chunk=3, pause=0.001)
    assert read_reply(r) == b"abcdef"
    thread.join()


def test_read_reply_refuses_a_second_message(pipe: tuple[int, int]) -> None:
    r, w = pipe
    os.write(w, frame(b"one") + frame(b"two"))
    with pytest.raises(RuntimeError, match="more than the reply"):
        read_reply(r)


def _by_hand_flags(env_fns: list, actions: list[np.ndarray], indices: list[list[int] | None]) -> list[np.ndarray]:
    """dones of each step computed by stepping each env directly (SB3's rule, autoreset)."""
    envs = [fn() for fn in env_fns]
    for env in envs:
        env.reset()
    dones = np.zeros(len(envs), dtype=bool)
    history = []
    for step_actions, step_indices in zip(actions, indices, strict=True):
        stepped = range(len(envs)) if step_indices is None else step_indices
        for i in stepped:
            _, _, terminated, truncated, _ = envs[i].step(int(step_actions[i]))
            dones[i] = terminated or truncated
            if dones[i]:
                envs[i].reset()
        history.append(dones.copy())
    return history


def test_env_group_flags_after_partial_and_full_steps() -> None:
    """Flags are cleared only for the envs stepped (partial batches) or all of them (full batches)."""
    env_fns = [lambda k=k: CounterEnv(episode_len=2, offset=k) for k in range(4)]
    group = EnvGroup(env_fns, range(4))
    group.reset(([None] * 4, [{}] * 4))
    schedule: list[list[int] | None] = [None, None, [0, 1], [2], None, [3], None, None, [1, 2, 3], None]
    actions = [np.ones(4, dtype=np.int64)] * len(schedule)
    expected = _by_hand_flags(env_fns, actions, schedule)
    for step_actions, indices, want in zip(actions, schedule, expected, strict=True):
        group.step(step_actions, indices)
        np.testing.assert_array_equal(group.dones, want)
        np.testing.assert_array_equal(group.terminations, want)  # CounterEnv terminates by default
        assert not group.truncations.any()


def test_env_group_forget_flags_clears_foreign_writes() -> None:
    group = EnvGroup([lambda: CounterEnv(episode_len=5)] * 3, range(3))
    group.reset(([None] * 3, [{}] * 3))
    group.step(np.zeros(3, dtype=np.int64))
    group.dones[:] = True  # e.g. the parent marking a restarted worker's envs done in shared memory
    group.forget_flags()
    group.step(np.zeros(3, dtype=np.int64))
    assert not group.dones.any()


@pytest.mark.parametrize("n_workers", [1, 2])
def test_subproc_dones_and_infos_match_dummy_over_episode_ends(n_workers: int) -> None:
    """The reply codes (nothing to report / some env done / pickled infos) rebuild the same step results."""
    env_fns = [
        lambda k=k: CounterEnv(episode_len=2 + k % 3, end="truncate" if k % 2 else "terminate") for k in range(5)
    ]
    dummy = DummyVecEnv(env_fns)
    subproc = SubprocVecEnv(env_fns, n_workers=n_workers, start_method="fork")
    seen = {"TimeLimit.truncated": 0, "terminal_observation": 0}
    try:
        dummy.seed(3)
        subproc.seed(3)
        np.testing.assert_array_equal(dummy.reset(), subproc.reset())
        for t in range(12):
            actions = np.full(5, t % 2, dtype=np.int64)
            d_obs, d_rew, d_done, d_info = dummy.step(actions)
            s_obs, s_rew, s_done, s_info = subproc.step(actions)
            np.testing.assert_array_equal(d_obs, s_obs)
            np.testing.assert_array_equal(d_rew, s_rew)
            np.testing.assert_array_equal(d_done, s_done)
            for d, s in zip(d_info, s_info, strict=True):
                assert d.keys() == s.keys()
                assert d["TimeLimit.truncated"] == s["TimeLimit.truncated"]
                seen["TimeLimit.truncated"] += d["TimeLimit.truncated"]
                if "terminal_observation" in d:
                    seen["terminal_observation"] += 1
                    np.testing.assert_array_equal(d["terminal_observation"], s["terminal_observation"])
    finally:
        dummy.close()
        subproc.close()
    # the schedule went through steps with and without episode ends, terminated and truncated ones
    assert seen["TimeLimit.truncated"] > 0
    assert seen["terminal_observation"] > seen["TimeLimit.truncated"]


@pytest.mark.parametrize("start_method", ["fork", "forkserver", "spawn"])
def test_payloads_larger_than_a_pipe_buffer_both_ways(start_method: str) -> None:
    """Requests and replies of several MB go through the pipes whole, on every start method."""
    venv = SubprocVecEnv([lambda: CounterEnv(episode_len=4)] * 2, n_workers=2, start_method=start_method)
    try:
        venv.reset()
        big = np.arange(1_000_000, dtype=np.int64)  # 8 MB each way: set it, read it back through get_attr
        venv.set_attr("payload", big)
        for value in venv.get_attr("payload"):
            np.testing.assert_array_equal(value, big)
        # the pipes still carry ordinary steps afterwards
        obs, rewards, dones, infos = venv.step(np.zeros(2, dtype=np.int64))
        np.testing.assert_array_equal(obs[:, 2], [1, 1])  # CounterEnv: t counts the steps of the episode
        np.testing.assert_array_equal(rewards, [0.5, 0.5])  # action + 0.5 * t
        assert not dones.any()
        assert infos == [{"t": 1, "episode": 0, "TimeLimit.truncated": False}] * 2
    finally:
        venv.close()
