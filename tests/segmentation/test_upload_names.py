"""Uploads keep their file names: cleaned, unique in the gallery, shown by the gallery, the
annotator page and the exports' file names, while ``path`` stays the content hash."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client
from graphql_relay import to_global_id

from segmentation.models import Video
from segmentation.services.upload_names import upload_name_clean
from segmentation.services.videos import video_register
from tests.conftest import running_server
from tests.segmentation.synthetic import make_video, write_mp4

UPLOAD_VIDEO = """mutation($file: Upload!) {
  uploadVideo(file: $file) { id path }
}"""


def upload(client: Client, content: bytes, name: str) -> dict:
    operations = {"query": UPLOAD_VIDEO, "variables": {"file": None}}
    response = client.post(
        "/graphql",
        {
            "operations": json.dumps(operations),
            "map": json.dumps({"0": ["variables.file"]}),
            "0": SimpleUploadedFile(name, content),
        },
    )
    return response.json()["data"]["uploadVideo"]


@pytest.fixture(scope="module")
def clips(tmp_path_factory: pytest.TempPathFactory) -> list[bytes]:
    """Three videos of different content."""
    folder = tmp_path_factory.mktemp("clips")
    return [
        write_mp4(make_video(frame_count), folder / f"{frame_count}.mp4").read_bytes()
        for frame_count in (2, 3, 4)
    ]


@pytest.mark.parametrize(
    ("name", "cleaned"),
    [
        ("clip.mp4", "clip.mp4"),
        ("../../etc/passwd.mp4", "passwd.mp4"),
        ("C:\\Users\\ana\\Videos\\clip.mov", "clip.mov"),
        ("two\nlines\r\n.mp4", "two lines.mp4"),
        ("nul\x00in\x07side.mp4", "nulinside.mp4"),
        ("  lots \t of   space  .mp4  ", "lots of space.mp4"),
        ("abc\u202egpj.mp4", "abcgpj.mp4"),  # the right-to-left override is dropped
        ("Café 日本 🎬.mp4", "Café 日本 🎬.mp4"),
        ("Cafe\u0301.mp4", "Café.mp4"),  # as NFC, as most systems send it
        ("a" * 300 + ".mp4", "a" * 116 + ".mp4"),
        ("é" * 200, "é" * 120),
        ("x." + "y" * 30, ("x." + "y" * 30)),  # too long to be an extension: kept whole
        ("", "video"),
        ("   ", "video"),
        ("\x00\n", "video"),
        ("..", "video"),
        ("dir/", "video"),
        (".mp4", ".mp4"),
    ],
)
def test_file_names_are_cleaned(name: str, cleaned: str) -> None:
    assert upload_name_clean(name=name) == cleaned
    assert len(upload_name_clean(name=name)) <= 120


@pytest.mark.django_db
def test_two_videos_uploaded_by_one_name_are_numbered(
    client: Client, media: Path, clips: list[bytes]
) -> None:
    first = upload(client, clips[0], "clip.mp4")
    second = upload(client, clips[1], "clip.mp4")
    third = upload(client, clips[2], "clip.mp4")

    names = [Video.objects.get(path=video["path"]).display_name for video in (first, second, third)]
    assert names == ["clip.mp4", "clip (2).mp4", "clip (3).mp4"]
    # the API's path stays the content hash
    for video in (first, second, third):
        row = Video.objects.get(path=video["path"])
        assert video["path"] == f"uploads/{row.sha256}.mp4"


@pytest.mark.django_db
def test_the_same_content_again_keeps_its_first_name(
    client: Client, media: Path, clips: list[bytes]
) -> None:
    first = upload(client, clips[0], "holiday.mp4")

    again = upload(client, clips[0], "other name.mp4")

    assert again == first
    assert Video.objects.get(path=first["path"]).display_name == "holiday.mp4"
    assert Video.objects.filter(origin="upload").count() == 1


@pytest.mark.django_db
def test_a_name_shown_by_an_older_video_counts_as_taken(
    client: Client, media: Path, clips: list[bytes]
) -> None:
    # given a gallery video with no display name, shown by its file's name
    (media / "gallery").mkdir(exist_ok=True)
    (media / "gallery" / "seaside.mp4").write_bytes(clips[0])
    video_register(path=media / "gallery" / "seaside.mp4", origin="gallery")

    uploaded = upload(client, clips[1], "seaside.mp4")

    assert Video.objects.get(path=uploaded["path"]).display_name == "seaside (2).mp4"


@pytest.mark.django_db
def test_a_long_name_numbered_stays_within_the_cap(
    client: Client, media: Path, clips: list[bytes]
) -> None:
    name = "n" * 200 + ".mp4"
    upload(client, clips[0], name)

    second = upload(client, clips[1], name)

    assert Video.objects.get(path=second["path"]).display_name == "n" * 112 + " (2).mp4"


@pytest.mark.django_db
def test_the_names_endpoint_and_the_annotator_page(
    client: Client, media: Path, clips: list[bytes]
) -> None:
    uploaded = upload(client, clips[0], "Café 日本.mp4")

    names = client.get("/videos/names", {"path": [uploaded["path"], "uploads/none.mp4"]})
    page = client.get("/annotate/", {"video": uploaded["id"]}).content.decode()
    unknown = client.get("/annotate/", {"video": to_global_id("Video", "999999")}).content.decode()

    assert names.json() == {"names": {uploaded["path"]: "Café 日本.mp4"}}
    assert "<title>Café 日本.mp4 · Annotate</title>" in page
    assert 'data-name="Café 日本.mp4">Café 日本.mp4</h1>' in page
    assert "<title>Annotate</title>" in unknown


@pytest.mark.django_db
def test_too_many_paths_are_refused(client: Client) -> None:
    response = client.get("/videos/names", {"path": [f"p{n}" for n in range(101)]})

    assert response.status_code == 400
    assert response.json() == {"error": "at most 100 paths, got 101", "code": "BAD_USER_INPUT"}


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("name", "disposition"),
    [
        ("clip.mp4", 'attachment; filename="clip-masks.zip"'),
        (
            "Café 日本.mp4",
            'attachment; filename="Cafe __-masks.zip"; '
            "filename*=UTF-8''Caf%C3%A9%20%E6%97%A5%E6%9C%AC-masks.zip",
        ),
        (
            'say "hi".mp4',
            'attachment; filename="say _hi_-masks.zip"; '
            "filename*=UTF-8''say%20%22hi%22-masks.zip",
        ),
    ],
)
def test_exports_are_named_after_the_video(
    client: Client, media: Path, clips: list[bytes], name: str, disposition: str
) -> None:
    uploaded = upload(client, clips[0], name)

    response = client.post(
        "/annotations/masks.zip",
        json.dumps({"video": uploaded["path"], "frames": []}),
        content_type="application/json",
    )

    assert response.status_code == 200
    assert response["Content-Disposition"] == disposition


def test_the_gallery_shows_the_names(page, tmp_path: Path) -> None:
    # given a server with two different videos uploaded as "clip.mp4"
    var_dir = tmp_path / "var"
    var_dir.mkdir()
    with running_server(var_dir) as server:
        for frame_count in (2, 3):
            clip = write_mp4(make_video(frame_count), tmp_path / f"{frame_count}.mp4")
            response = requests.post(
                f"{server}/graphql",
                data={
                    "operations": json.dumps({"query": UPLOAD_VIDEO, "variables": {"file": None}}),
                    "map": json.dumps({"0": ["variables.file"]}),
                },
                files={"0": ("clip.mp4", clip.read_bytes(), "video/mp4")},
                timeout=60,
            )
            assert "errors" not in response.json(), response.text

        # when the gallery is opened
        page.goto(f"{server}/")
        page.wait_for_function("() => document.querySelectorAll('.video-card').length === 3")
        page.shot("named")

        # then the cards carry the names, as label and title
        labels = page.eval_on_selector_all(".video-card strong", "all => all.map(n => n.innerText)")
        titles = page.eval_on_selector_all(".video-card", "all => all.map(n => n.title)")
        assert labels == ["clip.mp4", "clip (2).mp4", "default.mp4"]
        assert titles == labels
