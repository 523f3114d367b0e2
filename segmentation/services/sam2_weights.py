"""Getting SAM 2 checkpoints onto this machine (``manage.py sam2_weights``).

A download goes to ``<file>.part`` beside its destination and becomes the file only once it is
whole and verified (its SHA-256, where one is known, and a load of its state dict), by an atomic
rename: a stopped download never leaves a file that looks like a checkpoint. A ``.part`` left by
a stopped download is resumed with an HTTP ``Range`` request; a server that ignores ranges sends
the whole file again. Proxies follow requests' usual environment variables (``HTTPS_PROXY``...).
A file fetched some other way (a browser, another machine) is copied in the same way and
verified the same before it is kept (:func:`weights_place`).
"""

from __future__ import annotations

import hashlib
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import requests
from django.conf import settings

from segmentation.engines.sam2.catalogue import OFFICIAL, OfficialCheckpoint

CHUNK = 1 << 16  # what a cut connection loses at most of what it had sent
ATTEMPTS = 4  # a connection cut mid-way is resumed this many times before giving up
TIMEOUT = (15, 60)  # seconds to connect, and to wait for the next bytes
SPARE_BYTES = 64 << 20  # kept free on the disk beyond the download

# what a cut connection raises (a body that stops short is a ChunkedEncodingError)
RETRIED = (requests.ConnectionError, requests.Timeout, requests.exceptions.ChunkedEncodingError)
# called with the bytes on disk and the whole file's (None when the server does not say)
Progress = Callable[[int, int | None], None]


class WeightsError(Exception):
    """A download that could not be completed or verified; the message says why."""


class DownloadFailed(WeightsError):
    """Nothing more could be fetched from the address (the connection failed, or the server
    refused); ``kept_bytes`` of the file were kept in ``part`` for the next try (0: none)."""

    def __init__(self, message: str, *, part: Path, kept_bytes: int) -> None:
        super().__init__(message)
        self.part = part
        self.kept_bytes = kept_bytes


@dataclass(frozen=True)
class Present:
    checkpoint: OfficialCheckpoint
    path: Path
    present: bool  # the file is there (a .part is not)
    partial_bytes: int  # of a stopped download, resumable


def weights_list(*, models_dir: Path) -> list[Present]:
    """Every official checkpoint and whether it is in ``models_dir``."""
    rows = []
    for checkpoint in OFFICIAL:
        path = models_dir / checkpoint.file_name
        part = _part(path)
        rows.append(
            Present(checkpoint, path, path.is_file(), part.stat().st_size if part.is_file() else 0)
        )
    return rows


def weights_fetch(
    *,
    url: str,
    destination: Path,
    sha256: str | None,
    progress: Progress | None = None,
    session: requests.Session | None = None,
) -> Path:
    """Download ``url`` to ``destination``, resuming a ``.part`` left by an earlier try, and
    verify it (``sha256`` when given, and a load of the state dict) before the rename. A file
    that fails either check is removed, and the error says what was expected and what came."""
    destination.parent.mkdir(parents=True, exist_ok=True)
    part = _part(destination)
    session = session or requests.Session()
    for attempt in range(1, ATTEMPTS + 1):
        try:
            _download(session, url, part, progress)
            break
        except RETRIED as error:
            if attempt == ATTEMPTS:
                have = _size(part)
                kept = f"{have} bytes are kept in {part}" if have else "nothing came"
                raise DownloadFailed(
                    f"{url}: the connection failed {ATTEMPTS} times ({error.__class__.__name__});"
                    f" {kept}",
                    part=part,
                    kept_bytes=have,
                ) from error
            time.sleep(min(2 ** (attempt - 1), 8) * settings.SAM2_FETCH_RETRY_MS / 1000)
    _verify(part, sha256)
    part.replace(destination)
    return destination


def weights_place(*, source: Path, destination: Path, sha256: str | None) -> Path:
    """Copy ``source``, a checkpoint fetched some other way, to ``destination``, verified as a
    download is (``sha256`` when given, and a load of the state dict) before the rename; the
    source is left as it was. A stopped download's ``.part`` is replaced."""
    if not source.is_file():
        raise WeightsError(f"{source}: no such file")
    destination.parent.mkdir(parents=True, exist_ok=True)
    _check_space(destination.parent, source.stat().st_size)
    part = _part(destination)
    shutil.copyfile(source, part)
    _verify(part, sha256)
    part.replace(destination)
    return destination


def _download(session: requests.Session, url: str, part: Path, progress: Progress | None) -> None:
    have = part.stat().st_size if part.is_file() else 0
    headers = {"Range": f"bytes={have}-"} if have else {}
    with session.get(url, headers=headers, stream=True, timeout=TIMEOUT) as response:
        if response.status_code == 416 and have:
            if _range_total(response) == have:  # the .part is whole already
                return None
            part.unlink()  # it is not a prefix of this file
            return _download(session, url, part, progress)
        if response.status_code == 206 and _range_start(response) != have:
            if not have:
                raise WeightsError(f"{url}: a part of the file came where all of it was asked for")
            part.unlink()  # the server answered another range: start again, asking for all
            return _download(session, url, part, progress)
        if response.status_code == 206:
            mode = "ab"
        elif response.status_code == 200:  # the server ignores ranges: from the start
            have, mode = 0, "wb"
        else:
            message = f"{url}: HTTP {response.status_code} {response.reason}".rstrip()
            raise DownloadFailed(message, part=part, kept_bytes=have)
        length = response.headers.get("Content-Length")
        total = have + int(length) if length is not None and length.isdigit() else None
        if total is not None:
            _check_space(part.parent, total - have)
        with part.open(mode) as out:
            for chunk in response.iter_content(CHUNK):
                out.write(chunk)
                have += len(chunk)
                if progress is not None:
                    progress(have, total)
        if total is not None and have != total:  # closed early without an error
            raise requests.ConnectionError(f"the body stopped at {have} of {total} bytes")
    return None


def _range_start(response: requests.Response) -> int | None:
    """Where a 206's ``Content-Range: bytes 100-199/200`` starts."""
    unit, _, span = response.headers.get("Content-Range", "").partition(" ")
    start = span.partition("-")[0]
    return int(start) if unit == "bytes" and start.isdigit() else None


def _range_total(response: requests.Response) -> int | None:
    """The whole length a 416's ``Content-Range: bytes */200`` gives."""
    unit, _, span = response.headers.get("Content-Range", "").partition(" ")
    total = span.rpartition("/")[2]
    return int(total) if unit == "bytes" and total.isdigit() else None


def _check_space(folder: Path, needed: int) -> None:
    free = shutil.disk_usage(folder).free
    if free < needed + SPARE_BYTES:
        raise WeightsError(
            f"not enough free disk space in {folder}: the download needs {needed / 1e6:.1f} MB"
            f" and {SPARE_BYTES / 1e6:.0f} MB to spare, {free / 1e6:.1f} MB are free"
        )


def _verify(part: Path, sha256: str | None) -> None:
    if sha256 is not None:
        digest = hashlib.sha256()
        with part.open("rb") as data:
            while block := data.read(CHUNK):
                digest.update(block)
        if digest.hexdigest() != sha256.lower():
            size = part.stat().st_size
            part.unlink()
            raise WeightsError(
                f"checksum mismatch: expected SHA-256 {sha256.lower()}, the {size} bytes that came"
                f" have {digest.hexdigest()}; the download was removed"
            )
    # PyTorch is imported only here: the list, and a fetch until its file is whole, need none of it.
    from segmentation.engines.sam2.checkpoint import CheckpointError, checkpoint_load

    try:
        checkpoint_load(part)
    except CheckpointError as error:
        part.unlink()
        message = f"the download is not a SAM 2 checkpoint ({error}); it was removed"
        raise WeightsError(message) from None


def _size(path: Path) -> int:
    return path.stat().st_size if path.is_file() else 0


def _part(destination: Path) -> Path:
    return destination.with_name(destination.name + ".part")
