"""VecVideoRecorder: SB3's trigger / length / naming rules, and the MP4 files themselves (decoded with OpenCV)."""

from __future__ import annotations

import functools
import gc
import itertools
import os
import subprocess
import sys
import textwrap
import warnings
from typing import Any

import cv2
import gymnasium as gym
import numpy as np
import pytest
from gymnasium import spaces

import vecenv
from vecenv.wrappers.vec_video_recorder import VecVideoRecorder, _to_bgr

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PaintEnv(gym.Env):
    """Renders a uniform frame whose colour encodes the env and the step: ``rgb(t_color, offset_color, 200)``.

    ``t`` counts every step since construction (never reset), so consecutive frames always differ.
    ``render`` returns None from step ``none_from`` on (a broken renderer).
    """

    metadata = {"render_modes": ["rgb_array"], "render_fps": 12}

    def __init__(
        self,
        offset: int = 0,
        render_mode: str | None = "rgb_array",
        frame_hw: tuple[int, int] = (16, 24),
        none_from: int | None = None,
    ) -> None:
        self.offset = offset
        self.render_mode = render_mode
        self.frame_hw = frame_hw
        self.none_from = none_from
        self.observation_space = spaces.Box(0, 10_000, (1,), np.float32)
        self.action_space = spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        return np.array([self.t], np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        self.t += 1
        return np.array([self.t], np.float32), 0.0, self.t % 7 == 0, False, {}

    def render(self) -> np.ndarray | None:
        if self.none_from is not None and self.t >= self.none_from:
            return None
        return np.full((*self.frame_hw, 3), paint_color(self.offset, self.t), dtype=np.uint8)


def paint_color(offset: int, t: int) -> tuple[int, int, int]:
    """The RGB colour PaintEnv ``offset`` renders at step ``t``."""
    return (20 + (12 * t) % 200, 40 + 80 * offset, 200)


class NoFpsPaintEnv(PaintEnv):
    """PaintEnv without ``render_fps`` in its metadata."""

    metadata = {"render_modes": ["rgb_array"]}


def paint_fns(n: int, **kwargs: Any) -> list:
    return [functools.partial(PaintEnv, offset=i, **kwargs) for i in range(n)]


def read_video(path: str) -> tuple[list[np.ndarray], float]:
    """Decode every frame of ``path`` (as RGB) and the frame rate."""
    capture = cv2.VideoCapture(path)
    assert capture.isOpened(), f"cannot open {path}"
    fps = capture.get(cv2.CAP_PROP_FPS)
    frames = []
    while True:
        ok, frame = capture.read()
        if not ok:
            break
        frames.append(frame[:, :, ::-1])
    capture.release()
    return frames, fps


def assert_close_image(decoded: np.ndarray, expected: np.ndarray, tol: float = 6.0) -> None:
    """Lossy-compression tolerant equality: same shape, small mean error in each channel."""
    assert decoded.shape == expected.shape
    error = np.abs(decoded.astype(np.float64) - expected.astype(np.float64)).reshape(-1, 3).mean(axis=0)
    assert (error < tol).all(), f"mean abs error per RGB channel {error}"


def step_n(recorder: vecenv.VecEnv, n: int) -> None:
    for _ in range(n):
        recorder.step(np.zeros(recorder.num_envs, dtype=np.int64))


def videos(folder: Any) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name.endswith(".mp4"))


def test_trigger_length_and_names_match_sb3(tmp_path):
    """SB3's own test case: CartPole, trigger ``x % 65 == 0``, length 10, 128 steps -> videos from steps 0 and 65."""
    venv = vecenv.make_vec_env("CartPole-v1", n_envs=2, seed=0)
    venv.action_space.seed(0)
    recorder = VecVideoRecorder(
        venv, str(tmp_path), record_video_trigger=lambda x: x % 65 == 0, video_length=10, name_prefix="agent-CartPole"
    )
    recorder.reset()
    for _ in range(128):
        recorder.step(np.array([venv.action_space.sample() for _ in range(2)]))
    assert recorder.step_id == 128
    assert not recorder.recording
    recorder.close()
    assert videos(tmp_path) == ["agent-CartPole-step-0-to-step-10.mp4", "agent-CartPole-step-65-to-step-75.mp4"]
    for name in videos(tmp_path):
        frames, fps = read_video(str(tmp_path / name))
        assert len(frames) == 11  # video_length + 1, the first frame included (as SB3)
        assert frames[0].shape == (800, 600, 3)  # two 400x600 frames tiled in a 2x1 grid
        assert fps == 50  # CartPole's metadata["render_fps"]
        assert any(np.abs(frames[0].astype(int) - frame.astype(int)).max() > 50 for frame in frames[1:])


def test_a_folder_whose_name_is_not_utf8(tmp_path):
    """A Linux folder name may hold any bytes (``os.fsdecode`` gives them as escapes): OpenCV cannot take such a
    path (it crashed the process), so the video is written through the open folder, under its own name."""
    folder = os.fsdecode(os.path.join(os.fsencode(str(tmp_path)), b"videos \xff run"))
    recorder = VecVideoRecorder(
        vecenv.DummyVecEnv(paint_fns(1)), folder, record_video_trigger=lambda step: step == 0, video_length=3
    )
    recorder.reset()
    step_n(recorder, 4)
    recorder.close()
    assert videos(folder) == ["rl-video-step-0-to-step-3.mp4"]
    fd = os.open(folder, os.O_RDONLY)
    try:
        frames, _ = read_video(f"/proc/self/fd/{fd}/rl-video-step-0-to-step-3.mp4")
    finally:
        os.close(fd)
    assert len(frames) == 4
    assert_close_image(frames[-1], np.full((*frames[-1].shape[:2], 3), paint_color(0, 3), dtype=np.uint8))


def test_frames_are_the_tiled_rgb_images(backend, make_venv, tmp_path):
    """Each video frame is tile_images() of the envs' frames at that step, colours in RGB order (both backends)."""
    recorder = VecVideoRecorder(make_venv(backend, paint_fns(3)), str(tmp_path), lambda step: step == 2, video_length=4)
    recorder.reset()
    step_n(recorder, 8)
    assert videos(tmp_path) == ["rl-video-step-2-to-step-6.mp4"]
    frames, fps = read_video(recorder.video_path)
    assert fps == 12
    assert len(frames) == 5
    for k, frame in enumerate(frames):
        t = 2 + k
        expected = vecenv.tile_images([np.full((16, 24, 3), paint_color(i, t), np.uint8) for i in range(3)])
        assert expected.shape == (32, 48, 3)  # 2x2 grid, the 4th cell black
        assert_close_image(frame, expected)
    # consecutive frames differ (the red channel encodes the step)
    red = [frame[:16, :24, 0].astype(float).mean() for frame in frames]
    assert all(later - earlier > 8 for earlier, later in itertools.pairwise(red))


def test_recorder_state(tmp_path):
    """step_id, recording, video_name / video_path and recorded_frame_count follow the recording."""
    recorder = VecVideoRecorder(vecenv.DummyVecEnv(paint_fns(1)), str(tmp_path), lambda s: s in (0, 5), video_length=2)
    assert (recorder.step_id, recorder.recording, recorder.video_path) == (0, False, None)
    recorder.reset()
    assert recorder.recording
    assert recorder.recorded_frame_count == 1
    assert recorder.video_name == "rl-video-step-0-to-step-2.mp4"
    assert recorder.video_path == os.path.join(str(tmp_path), recorder.video_name)
    step_n(recorder, 1)
    assert (recorder.step_id, recorder.recording, recorder.recorded_frame_count) == (1, True, 2)
    step_n(recorder, 1)
    assert (recorder.step_id, recorder.recording, recorder.recorded_frame_count) == (2, False, 0)
    step_n(recorder, 3)
    assert recorder.step_id == 5
    assert recorder.recording
    assert recorder.video_name == "rl-video-step-5-to-step-7.mp4"
    recorder.close()
    assert not recorder.recording
    assert [len(read_video(str(tmp_path / name))[0]) for name in videos(tmp_path)] == [3, 1]


def test_trigger_never_fires(tmp_path):
    """No trigger, no file; the folder is still created (absolute)."""
    folder = tmp_path / "sub" / "videos"
    recorder = VecVideoRecorder(vecenv.DummyVecEnv(paint_fns(1)), str(folder), lambda s: False)
    assert recorder.video_folder == str(folder) and os.path.isabs(recorder.video_folder)
    recorder.reset()
    step_n(recorder, 5)
    recorder.close()
    assert videos(folder) == []


def test_close_finalizes_a_partial_video(backend, make_venv, tmp_path):
    """close() writes the frames recorded so far and closes the venv."""
    venv = make_venv(backend, paint_fns(2))
    recorder = VecVideoRecorder(venv, str(tmp_path), lambda s: s == 0, video_length=50)
    recorder.reset()
    step_n(recorder, 5)
    recorder.close()
    frames, _ = read_video(str(tmp_path / "rl-video-step-0-to-step-50.mp4"))
    assert len(frames) == 6
    assert frames[0].shape == (32, 24, 3)
    with pytest.raises(vecenv.ClosedVecEnvError):
        venv.reset()
    recorder.close()  # idempotent


def test_garbage_collection_finalizes_the_video(tmp_path):
    """A recorder dropped without close() finalizes its video when collected (the recorder is not kept alive)."""
    venv = vecenv.DummyVecEnv(paint_fns(1))
    recorder = VecVideoRecorder(venv, str(tmp_path), lambda s: s == 0, video_length=50)
    recorder.reset()
    step_n(recorder, 4)
    path = recorder.video_path
    del recorder
    gc.collect()
    frames, _ = read_video(path)
    assert len(frames) == 5
    venv.close()


EXIT_SCRIPT = """
import sys
sys.path.insert(0, {repo!r})
import numpy as np
from tests.test_vec_video_recorder import PaintEnv
from vecenv import DummyVecEnv
from vecenv.wrappers.vec_video_recorder import VecVideoRecorder

recorder = VecVideoRecorder(DummyVecEnv([PaintEnv]), {folder!r}, lambda s: s == 0, video_length=100)
recorder.reset()
for _ in range(9):
    recorder.step(np.zeros(1, dtype=np.int64))
print(recorder.video_path)
if {leak}:
    # the recorder is never freed, as if a C extension or an uncollected cycle held it:
    # only an exit hook can finalize the video
    import ctypes
    ctypes.pythonapi.Py_IncRef(ctypes.py_object(recorder))
# no close(): the video must be finalized at interpreter exit
"""


@pytest.mark.parametrize("leak", [False, True], ids=["global", "never-freed"])
def test_interpreter_exit_finalizes_the_video(tmp_path, leak):
    """A script that exits without close() leaves a complete, decodable video."""
    script = tmp_path / "record.py"
    script.write_text(textwrap.dedent(EXIT_SCRIPT.format(repo=REPO, folder=str(tmp_path), leak=leak)))
    result = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    path = result.stdout.strip().splitlines()[-1]
    assert os.path.basename(path) == "rl-video-step-0-to-step-100.mp4"
    frames, fps = read_video(path)
    assert len(frames) == 10
    assert fps == 12
    assert_close_image(frames[-1], np.full((16, 24, 3), paint_color(0, 9), np.uint8))


def test_existing_files_are_never_overwritten(tmp_path):
    """A name already taken (earlier file, another recorder) gets ``_1``, ``_2``...; the old files are untouched."""
    (tmp_path / "rl-video-step-0-to-step-3.mp4").write_bytes(b"not a video")
    recorders = [
        VecVideoRecorder(vecenv.DummyVecEnv(paint_fns(1)), str(tmp_path), lambda s: s == 0, video_length=3)
        for _ in range(2)
    ]
    for recorder in recorders:
        recorder.reset()
    assert [recorder.video_name for recorder in recorders] == [
        "rl-video-step-0-to-step-3_1.mp4",
        "rl-video-step-0-to-step-3_2.mp4",
    ]
    for recorder in recorders:
        step_n(recorder, 3)
        recorder.close()
    assert (tmp_path / "rl-video-step-0-to-step-3.mp4").read_bytes() == b"not a video"
    for recorder in recorders:
        assert len(read_video(recorder.video_path)[0]) == 4


def test_reset_while_recording_keeps_the_first_video_under_its_own_name(tmp_path):
    """Started at step 1, cut by a reset at step 3 whose trigger fires: each video keeps its own name.

    (SB3 saves the cut video under the new video's name, which the new video then overwrites.)
    """
    recorder = VecVideoRecorder(vecenv.DummyVecEnv(paint_fns(1)), str(tmp_path), lambda s: s in (1, 3), video_length=4)
    recorder.reset()
    step_n(recorder, 3)
    recorder.reset()
    step_n(recorder, 4)
    recorder.close()
    assert videos(tmp_path) == ["rl-video-step-1-to-step-5.mp4", "rl-video-step-3-to-step-7.mp4"]
    assert len(read_video(str(tmp_path / "rl-video-step-1-to-step-5.mp4"))[0]) == 3
    assert len(read_video(str(tmp_path / "rl-video-step-3-to-step-7.mp4"))[0]) == 5


def test_reset_while_recording_starts_a_new_video(tmp_path):
    """reset() with the trigger firing ends the current video and starts another one (SB3), under a new name."""
    recorder = VecVideoRecorder(vecenv.DummyVecEnv(paint_fns(1)), str(tmp_path), lambda s: s == 0, video_length=10)
    recorder.reset()
    recorder.reset()
    step_n(recorder, 2)
    recorder.close()
    assert videos(tmp_path) == ["rl-video-step-0-to-step-10.mp4", "rl-video-step-0-to-step-10_1.mp4"]
    assert len(read_video(str(tmp_path / "rl-video-step-0-to-step-10.mp4"))[0]) == 1
    assert len(read_video(str(tmp_path / "rl-video-step-0-to-step-10_1.mp4"))[0]) == 3


@pytest.mark.parametrize(
    ("env_cls", "expected_fps"), [(PaintEnv, 12), (NoFpsPaintEnv, 30)], ids=["render_fps", "default"]
)
def test_fps_from_base_env_metadata(backend, make_venv, tmp_path, env_cls, expected_fps):
    """The frame rate is the base env's metadata["render_fps"] (30 if absent); the metadata is copied as SB3 does."""
    venv = make_venv(backend, [env_cls])
    recorder = VecVideoRecorder(venv, str(tmp_path), lambda s: s == 0, video_length=2)
    assert recorder.frames_per_sec == expected_fps
    assert venv.metadata == env_cls.metadata
    recorder.reset()
    step_n(recorder, 2)
    assert read_video(recorder.video_path)[1] == expected_fps


@pytest.mark.parametrize("render_mode", [None, "human"])
def test_requires_rgb_array_render_mode(render_mode, tmp_path):
    """Envs without render_mode="rgb_array": a ValueError saying how to build them; no folder is created."""
    venv = vecenv.DummyVecEnv(paint_fns(1, render_mode=render_mode))
    folder = tmp_path / "videos"
    with pytest.raises(ValueError, match=r"render_mode='rgb_array'.*make_vec_env") as info:
        VecVideoRecorder(venv, str(folder), lambda s: True)
    assert repr(render_mode) in str(info.value)
    assert "gymnasium.make(env_id, render_mode='rgb_array')" in str(info.value)
    assert not folder.exists()
    venv.close()


def test_video_length_must_be_positive(tmp_path):
    venv = vecenv.DummyVecEnv(paint_fns(1))
    with pytest.raises(ValueError, match="video_length"):
        VecVideoRecorder(venv, str(tmp_path), lambda s: True, video_length=0)
    venv.close()


def test_broken_frames_stop_recording_with_a_warning(tmp_path):
    """A non-array frame stops the recording (SB3) with a warning; the frames so far are kept."""
    recorder = VecVideoRecorder(
        vecenv.DummyVecEnv(paint_fns(1, none_from=3)), str(tmp_path), lambda s: s == 0, video_length=10
    )
    recorder.reset()
    step_n(recorder, 2)
    with pytest.warns(UserWarning, match=r"Recording stopped: .*NoneType.*the video so far is in"):
        step_n(recorder, 1)
    assert not recorder.recording
    step_n(recorder, 2)  # no trigger, no error
    recorder.close()
    assert len(read_video(str(tmp_path / "rl-video-step-0-to-step-10.mp4"))[0]) == 3


def test_broken_first_frame_leaves_no_file(tmp_path):
    recorder = VecVideoRecorder(
        vecenv.DummyVecEnv(paint_fns(1, none_from=0)), str(tmp_path), lambda s: s == 0, video_length=10
    )
    with pytest.warns(UserWarning, match="no video was written"):
        recorder.reset()
    recorder.close()
    assert videos(tmp_path) == []


def test_odd_frame_size_is_padded(tmp_path):
    """Odd sizes (which the encoder would crop) are padded with a black row / column."""
    recorder = VecVideoRecorder(
        vecenv.DummyVecEnv(paint_fns(1, frame_hw=(15, 21))), str(tmp_path), lambda s: s == 0, video_length=2
    )
    recorder.reset()
    step_n(recorder, 2)
    frames, _ = read_video(recorder.video_path)
    assert len(frames) == 3
    assert frames[0].shape == (16, 22, 3)
    assert_close_image(frames[0][:14, :20], np.full((14, 20, 3), paint_color(0, 0), np.uint8))
    recorder.close()


def test_to_bgr_conversions():
    rgb = np.zeros((2, 4, 3), np.uint8)
    rgb[..., 0] = 1
    rgb[..., 2] = 3
    np.testing.assert_array_equal(_to_bgr(rgb)[0, 0], [3, 0, 1])
    rgba = np.concatenate([rgb, np.full((2, 4, 1), 9, np.uint8)], axis=2)
    np.testing.assert_array_equal(_to_bgr(rgba)[0, 0], [3, 0, 1])
    gray = np.full((2, 4, 1), 5, np.uint8)
    np.testing.assert_array_equal(_to_bgr(gray)[0, 0], [5, 5, 5])
    assert _to_bgr(rgb[:1, :3]).shape == (2, 4, 3)
    assert _to_bgr(rgb).flags["C_CONTIGUOUS"]
    with pytest.raises(ValueError, match="uint8"):
        _to_bgr(rgb.astype(np.float32))


def test_no_frames_kept_in_memory(tmp_path):
    """Frames are written as they arrive: the recorder holds no list of frames."""
    recorder = VecVideoRecorder(vecenv.DummyVecEnv(paint_fns(1)), str(tmp_path), lambda s: s == 0, video_length=50)
    recorder.reset()
    step_n(recorder, 10)
    for value in vars(recorder).values():
        assert not (isinstance(value, list) and any(isinstance(item, np.ndarray) for item in value))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        recorder.close()
