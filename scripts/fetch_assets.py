"""Fetch the front-end packages listed in ``assets.json`` from the npm registry into ``vendor/``.

The pages load their JavaScript from our own server, never from a CDN, and a fresh machine
may have Python but no Node.js; so this script does the one thing npm would do for us here:
download each pinned tarball, check it against the lock's ``sha512`` integrity, and extract the
listed files. Standard library only, so it runs before any requirement is installed.

    python scripts/fetch_assets.py [--manifest assets.json] [--dest vendor] [--registry URL]
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_REGISTRY = "https://registry.npmjs.org"
STAMP = ".integrity"


class AssetError(Exception):
    pass


@dataclass(frozen=True)
class Package:
    name: str
    version: str
    integrity: str
    files: tuple[str, ...]

    @property
    def tarball_path(self) -> str:
        unscoped = self.name.rsplit("/", 1)[-1]
        return f"{self.name}/-/{unscoped}-{self.version}.tgz"


def manifest_load(path: Path) -> list[Package]:
    data = json.loads(path.read_text(encoding="utf-8"))
    return [
        Package(
            name=entry["name"],
            version=entry["version"],
            integrity=entry["integrity"],
            files=tuple(entry["files"]),
        )
        for entry in data["packages"]
    ]


def integrity_check(package: Package, payload: bytes) -> None:
    algorithm, _, expected = package.integrity.partition("-")
    if algorithm not in {"sha256", "sha384", "sha512"}:
        raise AssetError(f"{package.name}: unsupported integrity algorithm {algorithm!r}")
    actual = base64.b64encode(hashlib.new(algorithm, payload).digest()).decode()
    if actual != expected:
        raise AssetError(
            f"{package.name}@{package.version}: integrity mismatch "
            f"(expected {algorithm}-{expected}, got {algorithm}-{actual})"
        )


def package_fetch(package: Package, *, registry: str, dest: Path, timeout: float = 60) -> bool:
    """Install one package's files under ``dest/<name>/``; ``False`` when already in place."""
    target = dest / package.name
    stamp = target / STAMP
    if stamp.is_file() and stamp.read_text(encoding="utf-8").strip() == package.integrity:
        return False
    if not registry.startswith(("https://", "http://")):
        raise AssetError(f"the registry must be an http(s) URL, got {registry!r}")
    url = f"{registry.rstrip('/')}/{package.tarball_path}"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:  # noqa: S310 (checked above)
            payload = response.read()
    except OSError as error:
        raise AssetError(
            f"{package.name}@{package.version}: cannot download {url}: {error}"
        ) from None
    integrity_check(package, payload)

    dest.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=dest))
    try:
        with tarfile.open(fileobj=io.BytesIO(payload), mode="r:gz") as archive:
            for name in package.files:
                try:
                    member = archive.getmember(f"package/{name}")
                except KeyError:
                    raise AssetError(
                        f"{package.name}@{package.version} has no file {name}"
                    ) from None
                source = archive.extractfile(member)
                if source is None:
                    raise AssetError(f"{package.name}@{package.version}: {name} is not a file")
                out = staging / name
                out.parent.mkdir(parents=True, exist_ok=True)
                out.write_bytes(source.read())
        (staging / STAMP).write_text(package.integrity + "\n", encoding="utf-8")
        # Swap the complete directory in; a failure above leaves the previous one untouched.
        if target.exists():
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staging, target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=ROOT / "assets.json")
    parser.add_argument("--dest", type=Path, default=ROOT / "vendor")
    parser.add_argument(
        "--registry", default=os.environ.get("NPM_REGISTRY", DEFAULT_REGISTRY), help="npm registry"
    )
    args = parser.parse_args(argv)
    try:
        for package in manifest_load(args.manifest):
            if package_fetch(package, registry=args.registry, dest=args.dest):
                print(f"fetched {package.name}@{package.version}")
    except AssetError as error:
        print(f"fetch_assets: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
