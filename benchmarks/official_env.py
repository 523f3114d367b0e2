"""A throwaway folder holding the official SAM 2 and EdgeTAM code, for the parity and speed
benchmarks to compare against. Neither is a dependency of this project.

    .venv/bin/python benchmarks/official_env.py /tmp/official

prints the ``PYTHONPATH`` for each:

- ``sam2==1.1.0`` (SAM 2's own release; its sources are used as they are, without building its
  CUDA extension, which only fills holes);
- ``edgetam-dimos==1.0.1``: facebookresearch/EdgeTAM at 9cc44bf, packaged, with one CPU
  fallback for hole filling. It is also importable as ``sam2``, hence its own folder.

Their dependencies (hydra-core, iopath, and for EdgeTAM timm 1.0.15, which builds its RepViT)
go into ``deps``. timm imports torchvision, and PyPI's torchvision is built against CUDA PyTorch:
beside a CPU build it fails at import (``operator torchvision::nms does not exist``). EdgeTAM
needs none of it, so ``standin`` holds a ``torchvision`` package with only the names timm
imports, empty.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

DEPENDENCIES = ("hydra-core", "iopath", "tqdm", "pyyaml", "huggingface_hub", "safetensors")
TIMM = "timm==1.0.15"  # what edgetam-dimos asks for with its extras

STANDIN = {
    "__init__.py": '"""Stand-in: the names timm imports (see official_env.py)."""\n',
    "ops/__init__.py": "",
    "ops/misc.py": "import torch\n\n\nclass FrozenBatchNorm2d(torch.nn.Module):\n    pass\n",
    "models/__init__.py": "",
    "transforms/__init__.py": (
        "def __getattr__(name):\n"
        "    return type(name, (), {'__init__': lambda self, *args, **kwargs: None})\n"
    ),
    "transforms/functional.py": (
        "import enum\n\n\n"
        "class InterpolationMode(enum.Enum):\n"
        "    NEAREST = 'nearest'\n    BILINEAR = 'bilinear'\n    BICUBIC = 'bicubic'\n"
        "    BOX = 'box'\n    HAMMING = 'hamming'\n    LANCZOS = 'lanczos'\n"
        "    NEAREST_EXACT = 'nearest-exact'\n"
    ),
    "datasets.py": "def __getattr__(name):\n    return type(name, (), {})\n",
}


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--quiet", *args], check=True)  # noqa: S603


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", type=Path)
    folder = parser.parse_args().folder.resolve()
    downloads = folder / "downloads"
    pip("download", "--no-deps", "-d", str(downloads), "edgetam-dimos==1.0.1", "sam2==1.1.0")
    with zipfile.ZipFile(next(downloads.glob("edgetam_dimos-*.whl"))) as wheel:
        wheel.extractall(folder / "edgetam")  # noqa: S202 (a release from the package registry)
    with tarfile.open(next(downloads.glob("sam2-1.1.0.tar.gz"))) as sdist:
        sdist.extractall(folder, filter="data")
    deps = folder / "deps"
    pip("install", "--target", str(deps), *DEPENDENCIES)
    pip("install", "--target", str(deps), "--no-deps", TIMM)
    for name, text in STANDIN.items():
        path = folder / "standin" / "torchvision" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    print(f"SAM 2:   PYTHONPATH={folder / 'sam2-1.1.0'}:{deps}")
    print(f"EdgeTAM: PYTHONPATH={folder / 'edgetam'}:{deps}:{folder / 'standin'}")


if __name__ == "__main__":
    main()
