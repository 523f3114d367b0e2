"""The default engine on the default video, as a new user meets it (issue 16's acceptance
check; tests/segmentation/test_demo_video.py holds the parts the engine meets).

    .venv/bin/python benchmarks/default_video.py [--given-masks]

Draws the default video, clicks once at the deepest point of the ball and of the box on frame 0
(or, with ``--given-masks``, gives their true masks there), propagates through all 144 frames and
prints, per object, IoU on frame 0 and the worst and mean IoU along the video, with the worst
frame. The targets are IoU >= 0.9 after the click and >= 0.85 on every frame.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from segmentation.demo_video import HEIGHT, WIDTH, demo_masks, demo_video_write  # noqa: E402
from segmentation.engines.classic import ClassicEngine  # noqa: E402
from segmentation.engines.frames import VideoFileFrames  # noqa: E402
from segmentation.evaluation.clicks import first_click  # noqa: E402
from segmentation.evaluation.metrics import region_similarity  # noqa: E402

OBJECTS = {1: "ball", 2: "box"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--given-masks", action="store_true", help="true masks instead of clicks")
    arguments = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "default.mp4"
        demo_video_write(path)
        frames = VideoFileFrames(path)
        state = ClassicEngine().open(frames)
        try:
            truth = demo_masks(0)
            for object_id, name in OBJECTS.items():
                if arguments.given_masks:
                    masks = state.add_mask(frame_index=0, object_id=object_id, mask=truth[name])
                else:
                    point = first_click(truth[name])
                    masks = state.add_points(
                        frame_index=0,
                        object_id=object_id,
                        points=[[point.x / (WIDTH - 1), point.y / (HEIGHT - 1)]],
                        labels=[1],
                    )
            first = {i: region_similarity(masks[i], truth[name]) for i, name in OBJECTS.items()}
            along: dict[int, list[float]] = {i: [] for i in OBJECTS}
            for frame_index, masks in state.propagate(start_frame_index=0):
                truth = demo_masks(frame_index)
                for object_id, name in OBJECTS.items():
                    along[object_id].append(region_similarity(masks[object_id], truth[name]))
        finally:
            state.close()
            frames.close()
    prompt = "given mask" if arguments.given_masks else "one click"
    for object_id, name in OBJECTS.items():
        values = along[object_id]
        worst = min(range(len(values)), key=values.__getitem__)
        below = [index for index, value in enumerate(values) if value < 0.85]
        print(
            f"{name}: {prompt} IoU {first[object_id]:.3f}; along {len(values)} frames worst "
            f"{values[worst]:.3f} (frame {worst}), mean {statistics.fmean(values):.3f}, "
            f"{len(below)} under 0.85: {below}"
        )


if __name__ == "__main__":
    main()
