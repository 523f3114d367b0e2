"""``manage.py sam2_weights`` against a loopback HTTP server that serves a checkpoint made here
(random weights in the official layout), behaving as real servers do and as broken ones do."""

from __future__ import annotations

import hashlib
import http.server
import io
import shutil
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import requests
import torch

from segmentation.engines.sam2.catalogue import checkpoint_resolve, official_find, official_named
from segmentation.engines.sam2.config import MODEL_SIZES
from segmentation.engines.sam2.model import Sam2Model
from segmentation.services import sam2_weights
from segmentation.services.sam2_weights import CHUNK, WeightsError, weights_fetch, weights_list
from tests.conftest import ROOT, manage, migrated, project_env, running_server, server_import
from tests.segmentation.engines.sam2.conftest import AUTO_DEVICE
from tests.segmentation.engines.sam2.small import small_checkpoint
from tests.segmentation.synthetic import HEIGHT, WIDTH, make_video, write_mp4
from tests.segmentation.test_propagation_stream import graphql, start_session

# Where the server cuts the body off: whole reads of the command, which keeps what it read whole
# (a cut loses at most the read under way).
CUT = 3 * CHUNK
SHORT = 2 * CHUNK  # what /truncated.pt sends of each request before it closes


@dataclass
class Upstream:
    """What the server serves, and what it was asked (path and Range header of each request)."""

    body: bytes
    url: str = ""
    requests: list[tuple[str, str | None]] = field(default_factory=list)
    cut_once: bool = True  # /cut.pt stops after CUT bytes on the first request only


class _Handler(http.server.BaseHTTPRequestHandler):
    upstream: Upstream

    def do_GET(self) -> None:
        upstream = self.upstream
        asked = self.headers.get("Range")
        upstream.requests.append((self.path, asked))
        body = upstream.body
        if self.path == "/missing.pt":
            self._send(404, b"not here")
        elif self.path == "/redirect.pt":
            self.send_response(302)
            self.send_header("Location", "/file.pt")
            self.send_header("Content-Length", "0")
            self.end_headers()
        elif self.path == "/norange.pt" or asked is None:
            if self.path == "/truncated.pt":
                self._send(200, body, send=SHORT)
            elif self.path == "/cut.pt" and upstream.cut_once:
                upstream.cut_once = False
                self._send(200, body, send=CUT)
            else:
                self._send(200, body)
        else:
            start = int(asked.removeprefix("bytes=").removesuffix("-"))
            if start >= len(body):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(body)}")
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self.send_response(206)
            self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.send_header("Content-Length", str(len(body) - start))
            self.end_headers()
            rest = body[start:]
            self.wfile.write(rest[:SHORT] if self.path == "/truncated.pt" else rest)
            if self.path == "/truncated.pt":
                self.close_connection = True

    def _send(self, status: int, body: bytes, *, send: int | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body if send is None else body[:send])
        if send is not None:
            self.close_connection = True

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def checkpoint_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return small_checkpoint(tmp_path_factory.mktemp("weights") / "made.pt").read_bytes()


@pytest.fixture(autouse=True)
def retried_at_once(settings) -> None:
    """The fetches in this process try a failed connection again at once (the waits between
    tries, 1.75 s in all, are the only thing that changes)."""
    settings.SAM2_FETCH_RETRY_MS = 0


# The same for the commands' processes.
AT_ONCE = {"SAM2_FETCH_RETRY_MS": "0"}


@pytest.fixture
def upstream(checkpoint_bytes: bytes) -> Iterator[Upstream]:
    served = Upstream(checkpoint_bytes)
    handler = type("Handler", (_Handler,), {"upstream": served})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    served.url = f"http://127.0.0.1:{server.server_address[1]}"
    yield served
    server.shutdown()
    server.server_close()


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def fetch(upstream: Upstream, models: Path, path: str, sha256: str | None = None):
    return weights_fetch(
        url=upstream.url + path,
        destination=models / "sam2.1_hiera_tiny.pt",
        sha256=sha256 or sha(upstream.body),
    )


def test_a_whole_fetch(upstream: Upstream, tmp_path: Path) -> None:
    path = fetch(upstream, tmp_path, "/file.pt")

    assert path.read_bytes() == upstream.body
    assert sorted(p.name for p in tmp_path.iterdir()) == ["sam2.1_hiera_tiny.pt"]
    assert upstream.requests == [("/file.pt", None)]


def test_a_fetch_cut_off_resumes_where_it_stopped(upstream: Upstream, tmp_path: Path) -> None:
    path = fetch(upstream, tmp_path, "/cut.pt")

    assert path.read_bytes() == upstream.body
    assert upstream.requests == [("/cut.pt", None), ("/cut.pt", f"bytes={CUT}-")]


def test_a_part_left_by_an_earlier_run_is_resumed(upstream: Upstream, tmp_path: Path) -> None:
    (tmp_path / "sam2.1_hiera_tiny.pt.part").write_bytes(upstream.body[:1000])

    path = fetch(upstream, tmp_path, "/file.pt")

    assert path.read_bytes() == upstream.body
    assert upstream.requests == [("/file.pt", "bytes=1000-")]


def test_a_server_without_ranges_sends_it_all_again(upstream: Upstream, tmp_path: Path) -> None:
    (tmp_path / "sam2.1_hiera_tiny.pt.part").write_bytes(upstream.body[:1000])

    path = fetch(upstream, tmp_path, "/norange.pt")

    assert path.read_bytes() == upstream.body
    assert upstream.requests == [("/norange.pt", "bytes=1000-")]


def test_a_redirect_is_followed(upstream: Upstream, tmp_path: Path) -> None:
    path = fetch(upstream, tmp_path, "/redirect.pt")

    assert path.read_bytes() == upstream.body
    assert upstream.requests == [("/redirect.pt", None), ("/file.pt", None)]


def test_a_404_says_so_and_leaves_nothing(upstream: Upstream, tmp_path: Path) -> None:
    with pytest.raises(WeightsError) as error:
        fetch(upstream, tmp_path, "/missing.pt")

    assert str(error.value) == f"{upstream.url}/missing.pt: HTTP 404 Not Found"
    assert list(tmp_path.iterdir()) == []


def test_a_wrong_checksum_removes_the_download(upstream: Upstream, tmp_path: Path) -> None:
    official = official_find("tiny").sha256

    with pytest.raises(WeightsError) as error:
        fetch(upstream, tmp_path, "/file.pt", sha256=official)

    assert str(error.value) == (
        f"checksum mismatch: expected SHA-256 {official}, the {len(upstream.body)} bytes that"
        f" came have {sha(upstream.body)}; the download was removed"
    )
    assert list(tmp_path.iterdir()) == []


def test_a_body_that_always_stops_short_is_kept_for_the_next_run(
    upstream: Upstream, tmp_path: Path
) -> None:
    # given a server that closes every response early
    with pytest.raises(WeightsError) as error:
        fetch(upstream, tmp_path, "/truncated.pt")

    # then four tries are made, each resuming the last, and what came is kept
    part = tmp_path / "sam2.1_hiera_tiny.pt.part"
    assert str(error.value) == (
        f"{upstream.url}/truncated.pt: the connection failed 4 times (ChunkedEncodingError);"
        f" {4 * SHORT} bytes are kept in {part}"
    )
    assert (error.value.part, error.value.kept_bytes) == (part, 4 * SHORT)
    assert [asked for _, asked in upstream.requests] == [
        None,
        f"bytes={SHORT}-",
        f"bytes={2 * SHORT}-",
        f"bytes={3 * SHORT}-",
    ]
    assert part.read_bytes() == upstream.body[: 4 * SHORT]

    # and the next run, from a server that sends it all, takes up from there
    path = fetch(upstream, tmp_path, "/file.pt")
    assert path.read_bytes() == upstream.body
    assert upstream.requests[-1] == ("/file.pt", f"bytes={4 * SHORT}-")


def refused_address() -> str:
    """An address on this machine where nothing listens: every connection is refused."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/edgetam.pt"


def test_a_fetch_that_got_nothing_says_what_to_do_next(tmp_path: Path) -> None:
    # given an address that refuses every connection (as a network that reaches nothing does)
    url = refused_address()

    failed = manage(
        "sam2_weights", "fetch", "edgetam", "--url", url, env=project_env(tmp_path, **AT_ONCE)
    )

    # then the error promises no resume (nothing came), and names the other ways: another
    # address, or the file fetched some other way, where it goes and how it is checked
    assert failed.returncode == 1
    assert failed.stderr.splitlines() == [
        f"CommandError: {url}: the connection failed 4 times (ConnectionError); nothing came.",
        "What next:",
        "- behind a proxy, set HTTPS_PROXY (and HTTP_PROXY) and run it again",
        "- fetch from an official address instead: leave out --url (--source meta or --source"
        " huggingface); or --url with another mirror of edgetam.pt",
        "- or download edgetam.pt some other way"
        " (https://github.com/facebookresearch/EdgeTAM/raw/main/checkpoints/edgetam.pt in a"
        " browser, or on another machine) and give it with --file PATH: it is checked against"
        " its SHA-256 (ed2d4850b8792c239689b043c47046ec239b6e808a3d9b6ae676c803fd8780df) and"
        f" loaded as a checkpoint, then kept as {tmp_path / 'models' / 'edgetam.pt'}",
    ]
    assert list((tmp_path / "models").iterdir()) == []


def test_a_fetch_that_kept_bytes_says_it_resumes(upstream: Upstream, tmp_path: Path) -> None:
    # given a server that closes every response early
    env = project_env(tmp_path, **AT_ONCE)
    command = ("sam2_weights", "fetch", "tiny", "--url", f"{upstream.url}/truncated.pt")

    failed = manage(*command, env=env)

    # then the error says a second run resumes, and the other ways resume from the same bytes
    part = tmp_path / "models" / "sam2.1_hiera_tiny.pt.part"
    assert failed.returncode == 1
    # (the progress line ended first: the error starts a line of its own)
    assert failed.stderr.splitlines()[-5:-2] == [
        f"CommandError: {upstream.url}/truncated.pt: the connection failed 4 times"
        f" (ChunkedEncodingError); {4 * SHORT} bytes are kept in {part}.",
        "What next:",
        "- run the same command again: it resumes from the bytes kept",
    ]
    assert failed.stderr.splitlines()[-2] == (
        "- fetch from an official address instead, resuming from the bytes kept: leave out"
        " --url (--source meta or --source huggingface); or --url with another mirror of"
        " sam2.1_hiera_tiny.pt"
    )
    assert part.stat().st_size == 4 * SHORT


def test_a_file_fetched_some_other_way_is_checked_then_kept(
    checkpoint_bytes: bytes, tmp_path: Path
) -> None:
    # given the file downloaded elsewhere, and a stopped download's part in the models folder
    downloaded = tmp_path / "Downloads" / "sam2.1_hiera_tiny.pt"
    downloaded.parent.mkdir()
    downloaded.write_bytes(checkpoint_bytes)
    models = tmp_path / "var" / "models"
    models.mkdir(parents=True)
    (models / "sam2.1_hiera_tiny.pt.part").write_bytes(b"x" * 1000)
    env = project_env(tmp_path / "var")

    # when it is given with the official file's SHA-256 (which this one, made here, has not)
    refused = manage("sam2_weights", "fetch", "tiny", "--file", str(downloaded), env=env)

    # then it is refused, and nothing is kept but the file given
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[-1] == (
        f"CommandError: checksum mismatch: expected SHA-256 {official_find('tiny').sha256}, the"
        f" {len(checkpoint_bytes)} bytes that came have {sha(checkpoint_bytes)}; the download"
        " was removed"
    )
    assert list(models.iterdir()) == []

    # and with its own SHA-256 it is checked, loaded and kept where the server looks
    kept = manage(
        "sam2_weights",
        "fetch",
        "tiny",
        "--file",
        str(downloaded),
        "--sha256",
        sha(checkpoint_bytes),
        env=env,
    )
    assert kept.returncode == 0, kept.stderr
    assert kept.stdout.splitlines() == [
        f"{models / 'sam2.1_hiera_tiny.pt'}: verified; use it with SEGMENTATION_ENGINE=sam2"
        " SAM2_CHECKPOINT=tiny"
    ]
    assert (models / "sam2.1_hiera_tiny.pt").read_bytes() == checkpoint_bytes
    assert sorted(p.name for p in models.iterdir()) == ["sam2.1_hiera_tiny.pt"]
    assert downloaded.read_bytes() == checkpoint_bytes


def test_a_file_that_is_not_a_checkpoint_is_removed(upstream: Upstream, tmp_path: Path) -> None:
    upstream.body = b"<html>a login page</html>"

    with pytest.raises(WeightsError) as error:
        fetch(upstream, tmp_path, "/file.pt")

    assert str(error.value).startswith(
        "the download is not a SAM 2 checkpoint (sam2.1_hiera_tiny.pt.part: cannot be read as a"
        " PyTorch checkpoint"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_list_shows_what_is_here(tmp_path: Path) -> None:
    (tmp_path / "sam2.1_hiera_small.pt").write_bytes(b"x")
    (tmp_path / "sam2_hiera_large.pt.part").write_bytes(b"x" * 10)

    rows = {
        (row.checkpoint.version, row.checkpoint.size): row
        for row in weights_list(models_dir=tmp_path)
    }

    assert len(rows) == 9
    assert [key for key, row in rows.items() if row.present] == [("2.1", "small")]
    assert {key: row.partial_bytes for key, row in rows.items() if row.partial_bytes} == {
        ("2.0", "large"): 10
    }


# The list in a process of its own, then which of PyTorch and SciPy it loaded.
LIST_THEN_LOADED = (
    "import sys, django; django.setup();"
    "from django.core.management import call_command; call_command('sam2_weights', 'list');"
    "print('loaded:', *[name for name in ('torch', 'scipy') if name in sys.modules])"
)


def test_the_list_loads_neither_pytorch_nor_scipy(tmp_path: Path) -> None:
    # given a fresh clone's models folder, and a stopped download
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "edgetam.pt.part").write_bytes(b"x" * 200_000)

    listed = subprocess.run(
        [sys.executable, "-c", LIST_THEN_LOADED],
        cwd=ROOT,
        env=project_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )

    # then the list is a look at the folder: PyTorch's import was 1.3 s of its 3.2 s here, far
    # more from a cold disk (issue 48 saw 24.5 s), and only a fetch's check of its file needs
    # it; SciPy's (0.3 s) came with the classic engine, whose options every start checks, and
    # only an option that is off by default needs it
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[-2:] == [
        "2.0  edgetam    edgetam.pt                    56.1 MB  partial (0.2 MB, fetch resumes it)",
        "loaded:",
    ]


@pytest.mark.parametrize(
    ("name", "file_name"),
    [
        ("tiny", "sam2.1_hiera_tiny.pt"),
        ("base_plus", "sam2.1_hiera_base_plus.pt"),
        ("sam2.1_hiera_large", "sam2.1_hiera_large.pt"),
        ("sam2_hiera_small", "sam2_hiera_small.pt"),
    ],
)
def test_a_setting_names_an_official_file(name: str, file_name: str, tmp_path: Path) -> None:
    (tmp_path / file_name).write_bytes(b"x")

    assert checkpoint_resolve(name, tmp_path) == tmp_path / file_name


def test_a_missing_named_checkpoint_says_how_to_fetch_it(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError) as error:
        checkpoint_resolve("sam2_hiera_tiny", tmp_path)

    assert str(error.value) == (
        f"SAM 2 checkpoint 'sam2_hiera_tiny' is not in {tmp_path}: fetch it with"
        " `python manage.py sam2_weights fetch tiny --version 2.0`"
    )


def test_edgetam_is_named_and_fetched_from_its_repository(tmp_path: Path) -> None:
    edgetam = official_find("edgetam")

    assert edgetam.url() == (
        "https://github.com/facebookresearch/EdgeTAM/raw/main/checkpoints/edgetam.pt"
    )
    assert edgetam.url("huggingface") == (
        "https://huggingface.co/facebook/EdgeTAM/resolve/main/edgetam.pt"
    )
    assert (edgetam.file_name, edgetam.bytes, edgetam.sha256) == (
        "edgetam.pt",
        56116523,
        "ed2d4850b8792c239689b043c47046ec239b6e808a3d9b6ae676c803fd8780df",
    )
    assert official_named("edgetam") == edgetam
    assert official_find("edgetam", "2.0") == edgetam
    with pytest.raises(FileNotFoundError) as error:
        checkpoint_resolve("edgetam", tmp_path)
    assert str(error.value) == (
        f"SAM 2 checkpoint 'edgetam' is not in {tmp_path}: fetch it with"
        " `python manage.py sam2_weights fetch edgetam`"
    )
    (tmp_path / "edgetam.pt").write_bytes(b"x")
    assert checkpoint_resolve("edgetam", tmp_path) == tmp_path / "edgetam.pt"


def test_edgetam_is_checked_against_its_pinned_hash(upstream: Upstream, tmp_path: Path) -> None:
    # given a mirror serving a SAM 2 checkpoint (a small one) where edgetam.pt should be
    env = project_env(tmp_path)
    command = ("sam2_weights", "fetch", "edgetam", "--url", f"{upstream.url}/file.pt")

    # when it is fetched as EdgeTAM
    refused = manage(*command, env=env)

    # then it is refused by the official file's SHA-256 and nothing is kept
    assert refused.returncode == 1
    assert refused.stderr.splitlines()[-1] == (
        "CommandError: checksum mismatch: expected SHA-256"
        " ed2d4850b8792c239689b043c47046ec239b6e808a3d9b6ae676c803fd8780df, the"
        f" {len(upstream.body)} bytes that came have {sha(upstream.body)}; the download was"
        " removed"
    )
    assert sorted(p.name for p in (tmp_path / "models").iterdir()) == []

    # and EdgeTAM's weights in the official layout, with their own hash given, are kept
    torch.manual_seed(0)
    state = Sam2Model(MODEL_SIZES["edgetam"]).state_dict()
    buffer = io.BytesIO()
    torch.save({"model": state}, buffer)
    upstream.body = buffer.getvalue()
    fetched = manage(*command, "--sha256", sha(upstream.body), env=env)
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout.splitlines() == [
        f"fetching {upstream.url}/file.pt",
        f"{tmp_path / 'models' / 'edgetam.pt'}: verified; use it with"
        " SEGMENTATION_ENGINE=sam2 SAM2_CHECKPOINT=edgetam",
    ]
    listed = manage("sam2_weights", "list", env=env)
    assert listed.stdout.splitlines() == [
        f"models folder: {tmp_path / 'models'}",
        "2.1  tiny       sam2.1_hiera_tiny.pt         156.0 MB  -",
        "2.1  small      sam2.1_hiera_small.pt        184.4 MB  -",
        "2.1  base_plus  sam2.1_hiera_base_plus.pt    323.6 MB  -",
        "2.1  large      sam2.1_hiera_large.pt        898.1 MB  -",
        "2.0  tiny       sam2_hiera_tiny.pt           155.9 MB  -",
        "2.0  small      sam2_hiera_small.pt          184.3 MB  -",
        "2.0  base_plus  sam2_hiera_base_plus.pt      323.5 MB  -",
        "2.0  large      sam2_hiera_large.pt          898.0 MB  -",
        "2.0  edgetam    edgetam.pt                    56.1 MB  present",
    ]


def test_official_urls() -> None:
    assert official_find("base_plus").url() == (
        "https://dl.fbaipublicfiles.com/segment_anything_2/092824/sam2.1_hiera_base_plus.pt"
    )
    assert official_find("base_plus", "2.0").url("huggingface") == (
        "https://huggingface.co/facebook/sam2-hiera-base-plus/resolve/main/sam2_hiera_base_plus.pt"
    )
    assert official_named("large") == official_find("large", "2.1")
    assert official_named("sam2_hiera_large") == official_find("large", "2.0")
    assert official_named("huge") is None


def test_fetched_by_name_the_server_segments_with_it(upstream: Upstream, tmp_path: Path) -> None:
    # given the command run with a mirror's URL and the checksum of the file it serves
    var, videos = tmp_path / "var", tmp_path / "videos"
    videos.mkdir()
    write_mp4(make_video(6), videos / "short.mp4")
    env = project_env(var, **AT_ONCE)
    fetched = manage(
        "sam2_weights",
        "fetch",
        "tiny",
        "--url",
        f"{upstream.url}/cut.pt",
        "--sha256",
        sha(upstream.body),
        env=env,
    )
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout.splitlines() == [
        f"fetching {upstream.url}/cut.pt",
        f"{var / 'models' / 'sam2.1_hiera_tiny.pt'}: verified; use it with"
        " SEGMENTATION_ENGINE=sam2 SAM2_CHECKPOINT=tiny",
    ]
    listed = manage("sam2_weights", "list", env=env)
    assert "2.1  tiny       sam2.1_hiera_tiny.pt         156.0 MB  present" in listed.stdout

    # when the server starts with the checkpoint named by its size
    settings = {
        "SEGMENTATION_ENGINE": "sam2",
        "SAM2_CHECKPOINT": "tiny",
        "SAM2_PRECISION": "float32",
    }
    migrated(project_env(var, **settings))
    assert manage("import_videos", str(videos), env=project_env(var, **settings)).returncode == 0
    with running_server(var, **settings) as server:
        assert requests.get(f"{server}/healthz", timeout=10).json()["engine"] == "sam2"
        annotator = requests.get(f"{server}/annotate/", timeout=10).text
        assert f'">Engine: SAM 2.1 custom on {AUTO_DEVICE} (float32)</span>' in annotator
        session_id = start_session(server, "gallery/short.mp4")
        clicked = graphql(
            server,
            "mutation($input: AddPointsInput!) {"
            " addPoints(input: $input) { frameIndex rleMaskList { objectId rleMask { size } } } }",
            input={
                "sessionId": session_id,
                "frameIndex": 0,
                "clearOldPoints": True,
                "objectId": 1,
                "labels": [1],
                "points": [[0.3, 0.5]],
            },
        )

    # then a click is answered by SAM 2 from the fetched file
    assert clicked == {
        "data": {
            "addPoints": {
                "frameIndex": 0,
                "rleMaskList": [{"objectId": 1, "rleMask": {"size": [HEIGHT, WIDTH]}}],
            }
        }
    }


@pytest.mark.parametrize(
    ("checkpoint", "message"),
    [
        (
            "tiny",
            "FileNotFoundError: SAM 2 checkpoint 'tiny' is not in {models}: fetch it with"
            " `python manage.py sam2_weights fetch tiny`",
        ),
        ("/nowhere/sam2.pt", "FileNotFoundError: checkpoint /nowhere/sam2.pt does not exist"),
    ],
)
def test_start_up_without_the_file_says_how_to_get_it(
    checkpoint: str, message: str, tmp_path: Path
) -> None:
    env = project_env(tmp_path, SEGMENTATION_ENGINE="sam2", SAM2_CHECKPOINT=checkpoint)

    started = server_import(env)
    listed = manage("sam2_weights", "list", env=env)

    # the server stops at its start; the command that fetches the file still runs
    assert started.returncode == 1
    assert started.stderr.splitlines()[-1] == message.format(models=tmp_path / "models")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines()[0] == f"models folder: {tmp_path / 'models'}"


def test_a_disk_without_room_is_found_before_any_byte_is_written(
    upstream: Upstream, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # given a disk whose free space is all the margin the command keeps
    free = shutil.disk_usage(tmp_path).free
    monkeypatch.setattr(sam2_weights, "SPARE_BYTES", free)

    with pytest.raises(WeightsError) as error:
        fetch(upstream, tmp_path, "/file.pt")

    assert str(error.value).startswith(
        f"not enough free disk space in {tmp_path}: the download needs"
        f" {len(upstream.body) / 1e6:.1f} MB and {free / 1e6:.0f} MB to spare, "
    )
    assert list(tmp_path.iterdir()) == []
