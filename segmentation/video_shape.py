"""What an annotation file is checked against and converted for: a video's name, size and
length, without the database (the exports convert in a process that has none:
``segmentation/services/exports.py``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import PurePosixPath


@dataclass(frozen=True)
class VideoShape:
    name: str  # what people see: ``Video.name``
    width: int
    height: int
    frame_count: int

    def export_name(self, *, suffix: str) -> str:
        """A download's file name: the name's stem and ``suffix`` (``clip-masks.zip``)."""
        return f"{PurePosixPath(self.name).stem}{suffix}"
