"""Uploads through GraphQL multipart requests: videos, shared videos, annotation files."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
import requests
from django.core.files.uploadedfile import SimpleUploadedFile
from django.core.management import CommandError, call_command
from django.test import Client

from segmentation.models import Annotation, DeletionId, Video
from segmentation.rle import rle_encode
from segmentation.services.videos import video_register
from tests.conftest import running_server
from tests.segmentation.synthetic import HEIGHT, WIDTH, make_video, write_mp4

pytestmark = pytest.mark.django_db

UPLOAD_VIDEO = """mutation($file: Upload!, $start: Float, $duration: Float) {
  uploadVideo(file: $file, startTimeSec: $start, durationTimeSec: $duration) {
    path posterPath width height url
  }
}"""


def upload(client: Client, query: str, content: bytes, name: str, **variables: object) -> dict:
    operations = {"query": query, "variables": {"file": None, **variables}}
    response = client.post(
        "/graphql",
        {
            "operations": json.dumps(operations),
            "map": json.dumps({"0": ["variables.file"]}),
            "0": SimpleUploadedFile(name, content),
        },
    )
    return response.json()


def stored_files(media: Path) -> list[str]:
    return sorted(str(p.relative_to(media)) for p in media.rglob("*") if p.is_file())


def test_upload_video(client: Client, media: Path, video_file: Path) -> None:
    deletion_id = client.post(
        "/graphql", {"query": "mutation { createDeletionId }"}, content_type="application/json"
    ).json()["data"]["createDeletionId"]

    result = upload(client, UPLOAD_VIDEO, video_file.read_bytes(), "my clip.mov")

    video = result["data"]["uploadVideo"]
    row = Video.objects.get(path=video["path"])
    assert video == {
        "path": f"uploads/{row.sha256}.mp4",
        "posterPath": f"posters/{row.sha256}.jpg",
        "width": WIDTH,
        "height": HEIGHT,
        "url": f"http://testserver/media/uploads/{row.sha256}.mp4",
    }
    assert (row.origin, row.frame_count, row.fps) == ("upload", 12, 24.0)
    assert row.deletion_id_id == deletion_id
    # it is in the gallery
    listed = client.post(
        "/graphql",
        {"query": "{ videos { edges { node { path } } } }"},
        content_type="application/json",
    ).json()
    assert {"node": {"path": video["path"]}} in listed["data"]["videos"]["edges"]
    # nothing half-written is left
    assert not [name for name in stored_files(media) if "partial" in name or "incoming" in name]


def test_upload_is_cut_to_its_time_range_and_the_cap(
    client: Client, media: Path, settings, tmp_path: Path
) -> None:
    settings.MAX_UPLOAD_DURATION_SEC = 1
    source = write_mp4(make_video(48), tmp_path / "two-seconds.mp4")

    capped = upload(client, UPLOAD_VIDEO, source.read_bytes(), "a.mp4")["data"]["uploadVideo"]
    ranged = upload(client, UPLOAD_VIDEO, source.read_bytes(), "a.mp4", start=1.5, duration=5.0)[
        "data"
    ]["uploadVideo"]

    assert Video.objects.get(path=capped["path"]).frame_count == 24
    assert Video.objects.get(path=ranged["path"]).frame_count == 12


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"", "the file is empty"),
        (b"GIF89a" + bytes(2000), "empty.mp4 is not a readable video"),
    ],
)
def test_upload_that_is_not_a_video(
    client: Client, media: Path, content: bytes, message: str
) -> None:
    before = stored_files(media)

    result = upload(client, UPLOAD_VIDEO, content, "empty.mp4")

    assert result["data"] is None
    assert result["errors"][0]["extensions"] == {"code": "UNSUPPORTED_MEDIA"}
    assert result["errors"][0]["message"] == message
    assert stored_files(media) == before
    assert not Video.objects.filter(origin="upload").exists()


@pytest.mark.parametrize(
    ("query", "truncated_message"),
    [
        (UPLOAD_VIDEO, "cut.mp4 is not a readable video"),
        (
            "mutation($file: Upload!) { uploadSharedVideo(file: $file) { path } }",
            "cut.mp4 is not a readable video",
        ),
    ],
)
def test_truncated_and_oversized_videos_are_refused(
    client: Client, media: Path, video_file: Path, settings, query: str, truncated_message: str
) -> None:
    before = stored_files(media)
    whole = video_file.read_bytes()

    truncated = upload(client, query, whole[: len(whole) // 3], "cut.mp4")
    settings.MAX_UPLOAD_PIXELS = WIDTH * HEIGHT - 1
    oversized = upload(client, query, whole, "wide.mp4")

    assert truncated["errors"][0]["extensions"] == {"code": "UNSUPPORTED_MEDIA"}
    assert truncated["errors"][0]["message"] == truncated_message
    assert oversized["errors"][0]["extensions"] == {"code": "UNSUPPORTED_MEDIA"}
    assert oversized["errors"][0]["message"] == (
        f"wide.mp4 is {WIDTH}x{HEIGHT}: pictures of at most {WIDTH * HEIGHT - 1:,} pixels are taken"
    )
    assert stored_files(media) == before
    assert not Video.objects.exists()


def test_bad_time_range(client: Client, media: Path, video_file: Path) -> None:
    result = upload(client, UPLOAD_VIDEO, video_file.read_bytes(), "a.mp4", start=-1.0)

    assert result["errors"][0]["message"] == "startTimeSec must be a non-negative number, got -1.0"
    assert result["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT"}


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"operations": "{}"}, "a multipart GraphQL request needs the field 'map'"),
        ({"map": "{}"}, "a multipart GraphQL request needs the field 'operations'"),
        ({"operations": "{", "map": "{}"}, "the operations and map fields must be JSON"),
        (
            {
                "operations": json.dumps({"query": UPLOAD_VIDEO}),
                "map": json.dumps({"0": ["variables.file"]}),
            },
            "the map names a file part '0' that the request lacks",
        ),
        (
            {
                "operations": json.dumps({"query": UPLOAD_VIDEO}),
                "map": json.dumps({"0": ["query"]}),
                "0": b"x",
            },
            "a file can only go into the variables, not 'query'",
        ),
        (
            {
                "operations": json.dumps({"query": UPLOAD_VIDEO, "variables": {}}),
                "map": json.dumps({"0": ["variables.files.3"]}),
                "0": b"x",
            },
            "the map's path 'variables.files.3' is not in the operations",
        ),
    ],
)
def test_malformed_multipart_requests(client: Client, fields: dict, message: str) -> None:
    data = {
        k: SimpleUploadedFile("f.bin", v) if isinstance(v, bytes) else v for k, v in fields.items()
    }

    response = client.post("/graphql", data)

    assert response.status_code == 400
    assert response.json() == {
        "errors": [{"message": message, "extensions": {"code": "BAD_USER_INPUT"}}]
    }


def test_upload_shared_video(client: Client, media: Path, video_file: Path) -> None:
    query = "mutation($file: Upload!) { uploadSharedVideo(file: $file) { path url } }"

    shared = upload(client, query, video_file.read_bytes(), "clip.mp4")["data"]["uploadSharedVideo"]

    row = Video.objects.get(path=shared["path"])
    assert shared["path"] == f"shared/{row.sha256}.mp4"
    assert (media / shared["path"]).read_bytes() == video_file.read_bytes()
    found = client.post(
        "/graphql",
        {
            "query": "query($p: String!) { sharedVideo(path: $p) { path } }",
            "variables": {"p": shared["path"]},
        },
        content_type="application/json",
    ).json()
    assert found["data"]["sharedVideo"] == {"path": shared["path"]}


@pytest.fixture
def library_video(media: Path, video_file: Path) -> Video:
    destination = media / "uploads" / "shapes.mp4"
    destination.parent.mkdir(parents=True, exist_ok=True)
    destination.write_bytes(video_file.read_bytes())
    return video_register(path=destination, origin="upload")


def annotation(of: Video, **changes: object) -> dict:
    mask = np.zeros((HEIGHT, WIDTH), bool)
    mask[10:50, 20:80] = True
    frame = {"frame_index": 3, "objects": [{"object_id": 0, "mask": rle_encode(mask)}]}
    return {"video": of.path, "frames": [frame]} | changes


ANNOTATIONS = "mutation($file: Upload!) { uploadAnnotations(file: $file) }"


def test_upload_annotations(client: Client, library_video: Video) -> None:
    data = annotation(library_video)

    result = upload(client, ANNOTATIONS, json.dumps(data).encode(), "masks.json")

    assert result == {"data": {"uploadAnnotations": True}}
    stored = Annotation.objects.get()
    assert (stored.video_id, stored.data) == (library_video.pk, data)


@pytest.mark.parametrize(
    ("changes", "code", "message"),
    [
        (
            {"video": "gallery/none.mp4"},
            "VIDEO_NOT_FOUND",
            "the annotations are of an unknown video 'gallery/none.mp4'",
        ),
        ({"frames": {}}, "BAD_USER_INPUT", "annotations need a list of frames"),
        (
            {"frames": [{"frame_index": 12, "objects": []}]},
            "BAD_USER_INPUT",
            "frames[0].frame_index must be within 0..11, got 12",
        ),
        (
            {"frames": [{"frame_index": 1, "objects": []}, {"frame_index": 1, "objects": []}]},
            "BAD_USER_INPUT",
            "frames[1]: frame 1 appears twice",
        ),
        (
            {
                "frames": [
                    {
                        "frame_index": 1,
                        "objects": [{"object_id": 0, "mask": {"size": [10, 10], "counts": "0"}}],
                    }
                ]
            },
            "BAD_USER_INPUT",
            "frames[0].objects[0].mask.size must be the video's [192, 320], got [10, 10]",
        ),
        (
            {
                "frames": [
                    {
                        "frame_index": 1,
                        "objects": [{"object_id": 0, "mask": {"size": [192, 320], "counts": "5"}}],
                    }
                ]
            },
            "BAD_USER_INPUT",
            "frames[0].objects[0].mask: a mask's runs do not add up to its size 192 x 320",
        ),
        (
            {"frames": [{"frame_index": 1, "objects": [{"object_id": -2, "mask": {}}]}]},
            "BAD_USER_INPUT",
            "frames[0].objects[0].object_id must be an integer within 0..2147483647 (GraphQL's "
            "Int), got -2",
        ),
    ],
)
def test_invalid_annotations_store_nothing(
    client: Client, library_video: Video, changes: dict, code: str, message: str
) -> None:
    result = upload(
        client, ANNOTATIONS, json.dumps(annotation(library_video, **changes)).encode(), "a.json"
    )

    assert result["data"] is None
    assert result["errors"][0] == result["errors"][0] | {
        "message": message,
        "extensions": {"code": code},
    }
    assert not Annotation.objects.exists()


@pytest.mark.parametrize(
    ("query", "code"),
    [
        (UPLOAD_VIDEO, "UNSUPPORTED_MEDIA"),
        (
            "mutation($file: Upload!) { uploadSharedVideo(file: $file) { path } }",
            "UNSUPPORTED_MEDIA",
        ),
        (ANNOTATIONS, "BAD_USER_INPUT"),
    ],
)
def test_an_empty_file_is_called_empty(client: Client, media: Path, query: str, code: str) -> None:
    before = stored_files(media)

    result = upload(client, query, b"", "nothing.mp4")

    assert result["data"] is None
    assert [(e["message"], e["extensions"]) for e in result["errors"]] == [
        ("the file is empty", {"code": code})
    ]
    assert stored_files(media) == before
    assert not Video.objects.filter(origin__in=["upload", "shared"]).exists()
    assert not Annotation.objects.exists()


def test_annotations_that_are_not_json(client: Client, library_video: Video) -> None:
    result = upload(client, ANNOTATIONS, b"\x89PNG...", "masks.png")

    assert result["errors"][0]["message"] == "masks.png is not a JSON annotation file"
    assert not DeletionId.objects.exists()


def test_too_large_uploads_are_refused_before_django_reads_them(tmp_path: Path) -> None:
    """Against the real server: a declared length over the cap, and a chunked body that grows
    past it, are refused with UPLOAD_TOO_LARGE and nothing is stored."""
    operations = json.dumps({"query": ANNOTATIONS, "variables": {"file": None}})
    with running_server(tmp_path / "var", MAX_UPLOAD_MB="1") as server:
        declared = requests.post(
            f"{server}/graphql",
            files={
                "operations": (None, operations),
                "map": (None, json.dumps({"0": ["variables.file"]})),
                "0": ("big.json", b"z" * 2 * 1024 * 1024),
            },
            timeout=30,
        )

        def growing():
            for _ in range(64):  # 4 MB, with no declared length
                yield b"y" * 65536

        chunked = requests.post(
            f"{server}/graphql",
            data=growing(),
            headers={"Content-Type": "application/json"},
            timeout=30,
        )

    expected = {
        "data": None,
        "errors": [
            {
                "message": "the upload is larger than the limit of 1 MB",
                "extensions": {"code": "UPLOAD_TOO_LARGE"},
            }
        ],
    }
    assert (declared.status_code, declared.json()) == (413, expected)
    assert (chunked.status_code, chunked.json()) == (413, expected)
    assert not [p for p in (tmp_path / "var").rglob("*") if p.is_file() and "media" in p.parts]


def test_delete_user_data(
    client: Client, media: Path, video_file: Path, library_video: Video
) -> None:
    other = Client()
    deletion_id = client.post(
        "/graphql",
        {"query": "mutation { createDeletionId acceptTos }"},
        content_type="application/json",
    ).json()["data"]["createDeletionId"]
    mine = upload(client, UPLOAD_VIDEO, video_file.read_bytes(), "mine.mp4")["data"]["uploadVideo"]
    upload(client, ANNOTATIONS, json.dumps(annotation(library_video)).encode(), "a.json")
    theirs = upload(
        other, UPLOAD_VIDEO, write_mp4(make_video(6), media / "x.mp4").read_bytes(), "t.mp4"
    )
    theirs = theirs["data"]["uploadVideo"]

    out = io.StringIO()
    call_command("delete_user_data", deletion_id, stdout=out)

    assert out.getvalue() == "deleted 1 video(s) and 1 annotation file(s)\n"
    assert not Video.objects.filter(path=mine["path"]).exists()
    assert not (media / mine["path"]).exists()
    assert Video.objects.filter(path=theirs["path"]).exists()
    assert (media / theirs["path"]).exists()
    assert not DeletionId.objects.exists()
    assert not Annotation.objects.exists()
    with pytest.raises(CommandError, match=r"^no deletion ID"):
        call_command("delete_user_data", deletion_id)
