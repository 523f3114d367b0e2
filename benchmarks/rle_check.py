"""How long checking one mask takes (``segmentation/rle.py``'s ``rle_decode``, which every
export, import and ``uploadAnnotations`` runs on each mask of the file before anything else):
docs/reliability.md, defect 4.

    .venv/bin/python benchmarks/rle_check.py [--repeat 20]

Prints the median CPU milliseconds of one ``rle_decode`` of three 480 x 854 masks (the default
video's size): isolated pixels (every other pixel of every other row, 102,480 parts: the
dearest mask a file can hold), a rectangle, and an empty one; then the CPU seconds of checking
every mask of an 8 MB file of masks of isolated pixels (40 of them, the file
``hostile_clients.py`` sends to the exports).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from segmentation.rle import rle_decode, rle_encode  # noqa: E402

HEIGHT, WIDTH = 480, 854
FILE_BYTES = 8 * 2**20  # MAX_ANNOTATIONS_MB as it ships


def masks() -> dict[str, dict]:
    isolated = np.zeros((HEIGHT, WIDTH), bool)
    isolated[::2, ::2] = True
    rectangle = np.zeros((HEIGHT, WIDTH), bool)
    rectangle[100:300, 200:600] = True
    return {
        "isolated pixels": rle_encode(isolated),
        "rectangle": rle_encode(rectangle),
        "empty": rle_encode(np.zeros((HEIGHT, WIDTH), bool)),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=20, help="checks of each mask")
    arguments = parser.parse_args()
    for name, rle in masks().items():
        times = []
        for _ in range(arguments.repeat):
            start = time.process_time()
            rle_decode(rle)
            times.append((time.process_time() - start) * 1000)
        print(f"{name} ({len(rle['counts']):,} characters): {statistics.median(times):.2f} ms")
    isolated = masks()["isolated pixels"]
    count = FILE_BYTES // (len(isolated["counts"]) + 100)
    start = time.process_time()
    for _ in range(count):
        rle_decode(isolated)
    print(f"{count} masks of isolated pixels (an 8 MB file): {time.process_time() - start:.2f} s")


if __name__ == "__main__":
    main()
