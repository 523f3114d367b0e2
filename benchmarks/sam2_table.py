"""The table of SAM 2 sizes x implementations: ``benchmarks/sam2_speed.py`` once per cell.

    .venv/bin/python benchmarks/sam2_table.py --official FOLDER
        [--sizes tiny,small,base_plus,large,edgetam] [--objects 1,3] [--impls ours,official]
        [--device auto] [--width 1280 --height 720] [--seconds 10] [--passes 3]
        [--precision auto] [--isa AVX2] [--compile [--warm]] [--json OUT.jsonl] [--timeout 600]

Each cell runs in a process of its own (a fresh device-memory peak, a fresh compilation) on the
same drawn 10 s 1280x720 video with the same seeded random weights, made once per size.
``--impls official`` needs the official code: ``--official`` names the folder
``benchmarks/official_env.py`` made (SAM 2's package for the SAM 2 sizes, EdgeTAM's for
``edgetam``). ``--isa AVX2`` runs every cell with ``ONEDNN_MAX_CPU_ISA=AVX2``, as on a CPU
without AVX-512 or AMX. Prints one line per cell as it ends, then the table: propagation
frames/s (over the whole pass, masks in host memory; for the official predictor also with its
masks left on the device, as its own benchmark counts), the median first click on a new frame
and on an encoded one, the peak device memory and the peak RSS.

Compiling takes minutes a cell (``max-autotune`` tries many kernels; the official predictor's
``vos_optimized`` build uses it). ``--warm`` first runs every cell on 1 s of video, all at once,
which fills PyTorch's on-disk compilation caches, so that the timed cells, one at a time, load
their kernels instead of compiling them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.sam2_speed import random_checkpoint

SPEED = Path(__file__).resolve().parent / "sam2_speed.py"


def cell(
    size: str, objects: int, impl: str, checkpoint: Path, args: argparse.Namespace
) -> dict | None:
    command = [sys.executable, str(SPEED), "--size", size, "--objects", str(objects)]
    command += ["--impl", impl, "--seconds", str(args.seconds), "--checkpoint", str(checkpoint)]
    command += ["--device", args.device, "--width", str(args.width), "--height", str(args.height)]
    command += ["--precision", args.precision, "--passes", str(args.passes)]
    if args.compile:
        command += ["--compile", "--compile-mode", args.compile_mode]
    try:
        done = subprocess.run(  # noqa: S603 (this interpreter and this folder's script)
            command,
            capture_output=True,
            text=True,
            timeout=args.timeout,
            check=False,
            env=cell_env(size, impl, args),
        )
    except subprocess.TimeoutExpired:
        print(f"{impl} {size} x{objects}: over {args.timeout} s", flush=True)
        return None
    if done.returncode != 0:
        print(f"{impl} {size} x{objects}: failed\n{done.stderr[-3000:]}", flush=True)
        return None
    # the first JSON line (EdgeTAM's predictor prints its progress while it is built)
    result = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("{")))
    print(json.dumps(result), flush=True)
    return result


def cell_env(size: str, impl: str, args: argparse.Namespace) -> dict[str, str]:
    env = dict(os.environ)
    if args.isa:
        env["ONEDNN_MAX_CPU_ISA"] = args.isa
    if impl == "official" and args.official:
        folder = args.official.resolve()
        paths = [folder / "sam2-1.1.0", folder / "deps"]
        if size == "edgetam":
            paths = [folder / "edgetam", folder / "deps", folder / "standin"]
        # in front of what is there (this project's dependencies, where they are not in the
        # interpreter's own site-packages)
        inherited = [env["PYTHONPATH"]] if env.get("PYTHONPATH") else []
        env["PYTHONPATH"] = ":".join([*(str(path) for path in paths), *inherited])
    return env


def warm(sizes: list[str], objects: list[int], impls: list[str], args: argparse.Namespace) -> None:
    """Compile every cell at once on a short video (the caches are shared through the disk)."""
    running = []
    for size in sizes:
        for count in objects:
            for impl in impls:
                command = [sys.executable, str(SPEED), "--size", size, "--objects", str(count)]
                command += ["--impl", impl, "--seconds", "1", "--compile"]
                command += ["--compile-mode", args.compile_mode]
                running.append(
                    subprocess.Popen(  # noqa: S603 (this interpreter and this folder's script)
                        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
                    )
                )
    for process in running:
        try:
            process.wait(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            process.kill()


def row(result: dict) -> str:
    on_device = result.get("fps_masks_on_device")
    extra = f" ({on_device:.2f})" if on_device else ""
    return (
        f"| {result['size']} | {result['objects']} | {result['impl']} | "
        f"{result.get('precision', '')} | {result['compile'] or 'no'} | "
        f"{result['fps']:.2f}{extra} | {result['fps_median_frame']:.2f} | "
        f"{result['first_click_ms']:.0f} | {result.get('encoded_click_ms', 0):.0f} | "
        f"{result['peak_cuda_mb'] or 0:.0f} | {result['peak_rss_mb']:.0f} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="tiny,small,base_plus,large")
    parser.add_argument("--objects", default="1,3")
    parser.add_argument("--impls", default="ours,official")
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--width", type=int, default=1280)
    parser.add_argument("--height", type=int, default=720)
    parser.add_argument("--precision", default="auto")
    parser.add_argument("--passes", type=int, default=3)
    parser.add_argument("--isa", default="", help="ONEDNN_MAX_CPU_ISA for every cell")
    parser.add_argument("--official", type=Path, help="the folder official_env.py made")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--compile-mode", default="reduce-overhead")
    parser.add_argument("--warm", action="store_true")
    parser.add_argument("--timeout", type=float, default=600)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    sizes, impls = args.sizes.split(","), args.impls.split(",")
    counts = [int(n) for n in args.objects.split(",")]
    if args.compile and args.warm:
        warm(sizes, counts, impls, args)
    results = []
    for size in sizes:
        with tempfile.TemporaryDirectory() as folder:
            checkpoint = random_checkpoint(size, Path(folder) / f"{size}.pt")
            for objects in counts:
                for impl in impls:
                    result = cell(size, objects, impl, checkpoint, args)
                    if result is None:
                        continue
                    results.append(result)
                    if args.json:
                        with args.json.open("a") as out:
                            out.write(json.dumps(result) + "\n")
    if not results:
        sys.exit("no cell ran")
    first = results[0]
    print(f"\n{first['device_name']}, torch {first['torch']}, CUDA {first['cuda']}", end="")
    print(f", {first['video']}, ISA limit {args.isa or 'none'}")
    print("| size | objects | impl | precision | compiled | frames/s |", end="")
    print(" frames/s (median frame) | click, new frame ms | click, encoded ms |", end="")
    print(" peak device MB | peak RSS MB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for result in results:
        print(row(result))


if __name__ == "__main__":
    main()
