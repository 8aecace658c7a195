"""``VecVideoRecorder``: record the rendered envs to MP4 files, streamed to disk with OpenCV."""

from __future__ import annotations

import itertools
import logging
import os
import warnings
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from vecenv.base import VecEnv, VecEnvObs, VecEnvStepReturn, tile_images
from vecenv.vec_env import WorkerVecEnv
from vecenv.wrappers.base import VecEnvWrapper

__all__ = ["VecVideoRecorder"]

logger = logging.getLogger(__name__)

#: OpenCV's MPEG-4 Part 2 codec: available in every opencv-python wheel, read by common players.
FOURCC = "mp4v"
#: Frame rate used when the env's metadata has no ``render_fps`` (as SB3).
DEFAULT_FPS = 30


def _envs_hold_metadata(base: Any) -> bool:
    """Whether the metadata of the base vector env ``base`` is its envs' (asked from env 0, as SB3 does for its
    ``DummyVecEnv`` and ``SubprocVecEnv``): vecenv's own backends, and SB3's two, whose ``metadata`` attribute
    (``SubprocVecEnv``'s) lists only the render modes."""
    if isinstance(base, WorkerVecEnv):
        return True
    return any(
        cls.__module__.startswith("stable_baselines3.") and cls.__name__ in ("DummyVecEnv", "SubprocVecEnv")
        for cls in type(base).__mro__
    )


class FrameError(ValueError):
    """A rendered frame that cannot be written to the current video."""


def _to_bgr(frame: np.ndarray) -> np.ndarray:
    """Convert an RGB(A) or grayscale uint8 ``(H, W, C)`` frame to BGR, padded with black to even ``H`` and ``W``.

    The MPEG-4 encoder drops the last row / column of odd-sized frames, so they are padded instead.

    :raises FrameError: for a frame that is not a uint8 ``(H, W, 1|3|4)`` array.
    """
    if frame.dtype != np.uint8 or frame.ndim != 3 or frame.shape[2] not in (1, 3, 4):
        raise FrameError(
            f"expected uint8 RGB frames of shape (H, W, 3) (or 1 / 4 channels), got dtype {frame.dtype} and "
            f"shape {frame.shape}"
        )
    # RGB(A) -> BGR (alpha dropped); gray -> 3 equal channels
    bgr = np.repeat(frame, 3, axis=2) if frame.shape[2] == 1 else frame[:, :, 2::-1]
    height, width = bgr.shape[:2]
    if height % 2 or width % 2:
        bgr = np.pad(bgr, ((0, height % 2), (0, width % 2), (0, 0)))
    return np.ascontiguousarray(bgr)


def _reserve_path(folder: str, name: str) -> str:
    """Create an empty file for ``name`` in ``folder`` and return its path; ``stem_1.mp4``, ``stem_2.mp4``... if taken.

    Creation is exclusive, so two recorders writing to the same folder never pick the same file.
    """
    stem, ext = os.path.splitext(name)
    for n in itertools.count():
        path = os.path.join(folder, name if n == 0 else f"{stem}_{n}{ext}")
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o666)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise AssertionError("unreachable")  # pragma: no cover


class VideoFile:
    """One MP4 file written frame by frame (no frame is kept in memory).

    The OpenCV writer is opened at the first frame, with that frame's size; every later frame must have
    the same size. :meth:`close` finalizes the file (or removes it if no frame was written).

    :param path: the file to write (overwritten).
    :param fps: frames per second.
    """

    def __init__(self, path: str, fps: float) -> None:
        self.path = path
        self.fps = fps
        #: number of frames written so far
        self.num_frames = 0
        #: ``(height, width)`` of the frames, set by the first frame
        self.frame_shape: tuple[int, int] | None = None
        self._writer: Any = None
        #: where the path is not UTF-8: the descriptor of its folder, through which OpenCV writes
        self._folder_fd: int | None = None
        self.closed = False

    def _opencv_path(self) -> str:
        """The path to give OpenCV. Its C++ API reads paths as UTF-8 and crashes the process on one that is not (a
        Linux file name may hold any bytes): such a file is written through its open folder (``/proc/self/fd``)."""
        try:
            self.path.encode("utf-8")
            return self.path
        except UnicodeEncodeError:
            pass
        folder, name = os.path.split(self.path)
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"the video file name {name!r} is not UTF-8, which OpenCV cannot write") from None
        fd = os.open(folder or ".", os.O_RDONLY | os.O_DIRECTORY)
        if not os.path.isdir(f"/proc/self/fd/{fd}"):
            os.close(fd)
            raise ValueError(
                f"the video folder {folder!r} is not UTF-8, which OpenCV cannot write to (and /proc, through which "
                "vecenv would, is not mounted): record into a folder whose name is UTF-8"
            )
        self._folder_fd = fd
        return f"/proc/self/fd/{fd}/{name}"

    def write(self, frame: np.ndarray) -> None:
        """Append one RGB frame.

        :param frame: a uint8 ``(H, W, 3)`` RGB frame (grayscale ``(H, W, 1)`` and RGBA are accepted too).
        :raises FrameError: if the frame is not such an array, or its size differs from the first frame's.
        :raises RuntimeError: if OpenCV cannot open a video writer for :attr:`path`.
        """
        import cv2  # imported on first use: worker processes never need it

        bgr = _to_bgr(frame)
        shape = (frame.shape[0], frame.shape[1])
        if self._writer is None:
            path = self._opencv_path()
            writer = cv2.VideoWriter(path, cv2.VideoWriter.fourcc(*FOURCC), float(self.fps), bgr.shape[1::-1])
            if not writer.isOpened():
                raise RuntimeError(
                    f"OpenCV could not open a {FOURCC!r} video writer for {self.path!r} "
                    f"({bgr.shape[1]}x{bgr.shape[0]} at {self.fps} fps). Check that the folder is writable and that "
                    "your OpenCV build has FFmpeg support (cv2.getBuildInformation(), 'Video I/O')."
                )
            self._writer = writer
            self.frame_shape = shape
        elif shape != self.frame_shape:
            raise FrameError(f"frame size changed from {self.frame_shape} to {shape} during the video")
        self._writer.write(bgr)
        self.num_frames += 1

    def close(self) -> None:
        """Finalize the file; remove it if no frame was written. Idempotent."""
        if self.closed:
            return
        self.closed = True
        if self._writer is not None:
            self._writer.release()
            self._writer = None
        elif os.path.exists(self.path) and os.path.getsize(self.path) == 0:
            os.remove(self.path)
        if self._folder_fd is not None:
            os.close(self._folder_fd)
            self._folder_fd = None


class VecVideoRecorder(VecEnvWrapper):
    """Record videos of the rendered envs as MP4 files (Stable-Baselines3's ``VecVideoRecorder``).

    Trigger, length and naming follow SB3: :meth:`reset` and every :meth:`step_wait` (after
    incrementing :attr:`step_id`) start a video when ``record_video_trigger(step_id)`` is true and none
    is recording. A video holds the frame at its start and one per step after it, ``video_length + 1``
    frames in all, and is named ``{name_prefix}-step-{start}-to-step-{start + video_length}.mp4``.
    Each frame tiles the frames of all envs into one image (:func:`~vecenv.tile_images`). Videos play at
    the base env's ``metadata["render_fps"]`` (30 if absent); as SB3, that metadata is copied to
    ``venv.metadata``.

    Differences from SB3: frames are written with OpenCV (codec ``mp4v``) as they arrive instead of
    being kept in memory for moviepy; a video is finalized when it reaches its length, at :meth:`close`,
    when the recorder is garbage-collected and at interpreter exit (not if the process is killed); an
    existing file is never overwritten: ``_1``, ``_2``... is added to the name (see :attr:`video_path`);
    odd frame sizes are padded with a black row / column; finished videos are logged (``logging``, INFO)
    instead of printed; :attr:`recorded_frame_count` replaces SB3's ``recorded_frames`` list.

    :param venv: the vectorized environment; its envs must use ``render_mode="rgb_array"``.
    :param video_folder: where videos are written (created if needed).
    :param record_video_trigger: called with :attr:`step_id`; returns whether to start a video.
    :param video_length: number of steps per video (the video has ``video_length + 1`` frames).
    :param name_prefix: start of the video file names.
    :raises ValueError: if the envs' render mode is not ``"rgb_array"`` (SB3 raises ``AssertionError``),
        or ``video_length < 1``.
    """

    def __init__(
        self,
        venv: VecEnv,
        video_folder: str,
        record_video_trigger: Callable[[int], bool],
        video_length: int = 200,
        name_prefix: str = "rl-video",
    ) -> None:
        VecEnvWrapper.__init__(self, venv)
        if venv.render_mode != "rgb_array":
            raise ValueError(
                f"VecVideoRecorder needs envs with render_mode='rgb_array', got render_mode={venv.render_mode!r}. "
                "Create them with make_vec_env(env_id, ...) (rgb_array is its default for env ids) or with "
                "DummyVecEnv([lambda: gymnasium.make(env_id, render_mode='rgb_array')])."
            )
        if video_length < 1:
            raise ValueError(f"video_length must be a positive number of steps, got {video_length}")
        #: the wrapped venv (SB3 attribute)
        self.env = venv
        base = venv.unwrapped
        metadata = base.get_attr("metadata", indices=0)[0] if _envs_hold_metadata(base) else base.metadata
        self.env.metadata = metadata
        #: frames per second of the videos
        self.frames_per_sec: float = metadata.get("render_fps") or DEFAULT_FPS

        self.record_video_trigger = record_video_trigger
        self.video_folder = os.path.abspath(video_folder)
        os.makedirs(self.video_folder, exist_ok=True)
        self.name_prefix = name_prefix
        self.video_length = video_length
        #: number of completed :meth:`step_wait` calls
        self.step_id = 0
        #: whether a video is being recorded
        self.recording = False
        #: file name and path of the current (or last) video; None before the first one
        self.video_name: str | None = None
        self.video_path: str | None = None
        self._video: VideoFile | None = None
        self._video_finalizer: weakref.finalize | None = None

    @property
    def recorded_frame_count(self) -> int:
        """Frames written to the current video (0 when not recording)."""
        return self._video.num_frames if self.recording and self._video is not None else 0

    def reset(self) -> VecEnvObs:
        """Reset all envs; start a video if the trigger fires at the current :attr:`step_id`.

        :return: the observations of the wrapped venv.
        """
        obs = self.venv.reset()
        if self._video_enabled():
            self._start_video_recorder()
        return obs

    def step_wait(self) -> VecEnvStepReturn:
        """Collect the step, then add a frame to the current video or start one if the trigger fires.

        :return: ``(obs, rewards, dones, infos)`` of the wrapped venv.
        """
        obs, rewards, dones, infos = self.venv.step_wait()
        self.step_id += 1
        if self.recording:
            self._capture_frame()
            if self.recording and self.recorded_frame_count > self.video_length:
                self._stop_recording()
        elif self._video_enabled():
            self._start_video_recorder()
        return obs, rewards, dones, infos

    def close(self) -> None:
        """Finalize the video being recorded, then close the wrapped venv."""
        try:
            if self.recording:
                self._stop_recording()
        finally:
            VecEnvWrapper.close(self)

    def _video_enabled(self) -> bool:
        return bool(self.record_video_trigger(self.step_id))

    def _start_video_recorder(self) -> None:
        """Open a new video named after :attr:`step_id` and write its first frame."""
        if self.recording:
            self._stop_recording()
        name = f"{self.name_prefix}-step-{self.step_id}-to-step-{self.step_id + self.video_length}.mp4"
        self.video_path = _reserve_path(self.video_folder, name)
        self.video_name = os.path.basename(self.video_path)
        video = VideoFile(self.video_path, self.frames_per_sec)
        self._video = video
        # finalizes the file at garbage collection and at interpreter exit; holds the file, not self
        self._video_finalizer = weakref.finalize(self, video.close)
        self.recording = True
        self._capture_frame()

    def _capture_frame(self) -> None:
        """Write the tiled frame of all envs; on a frame that cannot be written, stop recording and warn (as SB3)."""
        assert self._video is not None and self.recording, "Cannot capture a frame: no video is being recorded."
        images: Sequence[Any] = self.venv.get_images()
        try:
            if not all(isinstance(image, np.ndarray) for image in images):
                kinds = sorted({type(image).__name__ for image in images})
                raise FrameError(f"expected get_images() to return numpy arrays, got {', '.join(kinds)}")
            self._video.write(tile_images(images))
        except FrameError as exc:
            self._stop_recording()
            kept = f"the video so far is in {self.video_path}" if self._video.num_frames else "no video was written"
            warnings.warn(f"Recording stopped: {exc}; {kept}.", stacklevel=3)
        except BaseException:
            self._stop_recording()
            raise

    def _stop_recording(self) -> None:
        """Finalize the current video."""
        assert self._video_finalizer is not None and self._video is not None, "no video is being recorded"
        self._video_finalizer()
        if self._video.num_frames:
            logger.info("Saved video %s (%d frames)", self.video_path, self._video.num_frames)
        self.recording = False
