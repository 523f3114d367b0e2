"""Sequences in the DAVIS layout: ``JPEGImages/*.jpg`` frames and ``Annotations/*.png`` truth.

Annotations are either palette PNGs, whose indices are object IDs (0 is background), or
greyscale PNGs, where every distinct non-zero value is an object (a binary 0/255 mask is one).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from segmentation.engines.frames import ImageFolderFrames


class SequenceError(ValueError):
    """The folder is not a DAVIS-layout sequence."""


@dataclass(frozen=True)
class Sequence:
    name: str
    frames_dir: Path
    annotation_paths: tuple[Path, ...]

    @classmethod
    def load(cls, folder: Path) -> Sequence:
        folder = Path(folder)
        frames_dir, annotations_dir = folder / "JPEGImages", folder / "Annotations"
        for required in (frames_dir, annotations_dir):
            if not required.is_dir():
                raise SequenceError(f"{folder} has no {required.name}/ folder")
        annotations = tuple(sorted(annotations_dir.glob("*.png")))
        frame_count = sum(1 for p in frames_dir.iterdir() if p.suffix.lower() in (".jpg", ".png"))
        if len(annotations) != frame_count or not annotations:
            raise SequenceError(
                f"{folder.name}: {frame_count} frames but {len(annotations)} annotations; "
                "every frame needs its ground truth"
            )
        return cls(folder.name, frames_dir, annotations)

    def frames(self) -> ImageFolderFrames:
        return ImageFolderFrames(self.frames_dir)

    def truth(self, index: int) -> dict[int, np.ndarray]:
        """Object ID -> boolean mask on frame ``index``."""
        labels = label_image(self.annotation_paths[index])
        return {int(value): labels == value for value in np.unique(labels) if value != 0}

    def object_ids(self) -> list[int]:
        return sorted(self.truth(0))


def label_image(path: Path) -> np.ndarray:
    with Image.open(path) as image:
        if image.mode == "P":
            return np.asarray(image, dtype=np.uint8)
        grey = np.asarray(image.convert("L"), dtype=np.uint8)
    values = np.unique(grey[grey > 0])
    labels = np.zeros(grey.shape, np.uint8)
    for number, value in enumerate(values, start=1):
        labels[grey == value] = number
    return labels
