"""What session operations take and answer: typed, frozen requests and results, masks as COCO
RLE.

Engines give boolean masks; :meth:`FrameMasks.from_masks` is where a session's masks become RLE,
once, in the process that runs the engine. The results then travel as they are: to GraphQL, to
the propagation stream, to the annotation export, and between an inference worker and a web
process as plain data (``as_message``/``from_message``), so that both hosts of a session give
the same answers. An object's mask is ``{"object_id", "mask"}`` in every plain form, the shape
of the SAM 2 demo's stream and of the annotation files. In an annotation file an object may also
carry the clicks that made its mask on that frame (``"points"`` and ``"labels"``, as
``addPoints`` takes them), so that an import gives back the work and not only its result; readers
that know nothing of them pass them by.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass

from segmentation.engines.base import Masks
from segmentation.rle import rle_encode


@dataclass(frozen=True)
class Clicks:
    """Clicks for one object on one frame."""

    frame_index: int
    object_id: int
    points: list[list[float]]  # [x, y] per click, normalized to [0, 1] by width and height
    labels: list[int]  # per click: 1 the object is here, 0 it is not
    clear_old_points: bool  # replace the object's earlier clicks on this frame

    def as_message(self) -> dict[str, object]:
        return asdict(self)

    @classmethod
    def from_message(cls, data: dict) -> Clicks:
        return cls(**data)


@dataclass(frozen=True)
class ObjectMask:
    object_id: int
    rle: dict[str, object]  # {"size": [H, W], "counts": "<COCO RLE>"}
    # The object's clicks on the frame, in an annotation file: [x, y] normalized as in Clicks,
    # and a label each. None where the mask came from elsewhere (propagated, given, streamed).
    points: list[list[float]] | None = None
    labels: list[int] | None = None

    def as_message(self) -> dict[str, object]:
        message: dict[str, object] = {"object_id": self.object_id, "mask": self.rle}
        if self.points is not None:
            message["points"] = self.points
            message["labels"] = self.labels
        return message

    @classmethod
    def from_message(cls, data: dict) -> ObjectMask:
        return cls(data["object_id"], data["mask"], data.get("points"), data.get("labels"))


@dataclass(frozen=True)
class FrameMasks:
    """Every object's mask on one frame, by object ID."""

    frame_index: int
    objects: tuple[ObjectMask, ...]
    engine_seconds: float = 0.0  # time the engine took (not waiting for the session's lock)

    @classmethod
    def from_masks(
        cls, frame_index: int, masks: Masks, engine_seconds: float = 0.0, *, nonempty: bool = False
    ) -> FrameMasks:
        """The frame's masks encoded; with ``nonempty``, the objects with a pixel only."""
        objects = tuple(
            ObjectMask(object_id, rle_encode(mask))
            for object_id, mask in sorted(masks.items())
            if mask.any() or not nonempty
        )
        return cls(frame_index, objects, engine_seconds)

    def as_message(self) -> dict[str, object]:
        return {
            "frame_index": self.frame_index,
            "objects": [mask.as_message() for mask in self.objects],
            "engine_seconds": self.engine_seconds,
        }

    @classmethod
    def from_message(cls, data: dict) -> FrameMasks:
        objects = tuple(ObjectMask.from_message(mask) for mask in data["objects"])
        return cls(data["frame_index"], objects, data.get("engine_seconds", 0.0))


@dataclass(frozen=True)
class Annotations:
    """A session's masks on every frame that has one, as ``uploadAnnotations`` takes them, with
    the clicks of each object on the frames where it was clicked."""

    video: str
    frames: tuple[FrameMasks, ...]

    def as_message(self) -> dict[str, object]:
        """The annotation file: ``{"video", "frames": [{"frame_index", "objects"}, ...]}``."""
        return {
            "video": self.video,
            "frames": [
                {
                    "frame_index": frame.frame_index,
                    "objects": [mask.as_message() for mask in frame.objects],
                }
                for frame in self.frames
            ],
        }

    @classmethod
    def from_message(cls, data: dict) -> Annotations:
        return cls(data["video"], tuple(FrameMasks.from_message(f) for f in data["frames"]))


@dataclass(frozen=True)
class HeldSession:
    """A live session, as the admin's view of who holds what shows it."""

    session_id: str
    client: str  # the address that opened it (core/client_address.py)
    video_path: str
    age_sec: float  # since it opened
    idle_sec: float  # since its last operation

    def as_message(self) -> dict:
        return asdict(self)

    @classmethod
    def from_message(cls, data: dict) -> HeldSession:
        return cls(**data)


@dataclass(frozen=True)
class Propagation:
    """A running propagation: the video's frame count, and each frame's masks as the engine
    finishes them, forward from the start frame to the end and then backward to frame 0.
    Closing ``frames`` early (the client hung up) stops the engine within a frame, as
    ``cancelPropagateInVideo`` does."""

    frame_count: int
    frames: AsyncIterator[FrameMasks]
