"""The video library through GraphQL: defaultVideo, videos (pagination), sharedVideo, node."""

from __future__ import annotations

from pathlib import Path

import pytest
from django.test import Client
from graphql_relay import to_global_id

from segmentation.models import Video
from segmentation.selectors import MAX_PAGE_SIZE
from segmentation.services.videos import video_default

pytestmark = pytest.mark.django_db

VIDEO_FIELDS = "id path posterPath width height url posterUrl"


def gql(client: Client, query: str, **variables: object) -> dict:
    response = client.post(
        "/graphql", {"query": query, "variables": variables}, content_type="application/json"
    )
    assert response["Content-Type"] == "application/json"
    return response.json()


def make_videos(count: int) -> list[Video]:
    return [
        Video.objects.create(
            path=f"gallery/v{n}.mp4",
            poster_path=f"posters/v{n}.jpg",
            width=640,
            height=360,
            fps=24.0,
            frame_count=24,
            duration=1.0,
            sha256=f"{n:064d}",
            origin=Video.Origin.GALLERY,
        )
        for n in range(count)
    ]


def test_default_video_is_drawn_once_and_served(client: Client, media: Path) -> None:
    result = gql(client, f"{{ defaultVideo {{ {VIDEO_FIELDS} }} }}")

    video = result["data"]["defaultVideo"]
    row = Video.objects.get()
    assert video == {
        "id": to_global_id("Video", str(row.pk)),
        "path": "gallery/default.mp4",
        "posterPath": f"posters/{row.sha256}.jpg",
        "width": 854,
        "height": 480,
        "url": "http://testserver/media/gallery/default.mp4",
        "posterUrl": f"http://testserver/media/posters/{row.sha256}.jpg",
    }
    assert (row.fps, row.frame_count, row.duration, row.origin) == (24.0, 144, 6.0, "gallery")
    # asked again, the same video comes back
    assert gql(client, "{ defaultVideo { id } }")["data"]["defaultVideo"]["id"] == video["id"]
    assert Video.objects.count() == 1
    # and its files are served
    poster = client.get(f"/media/{row.poster_path}")
    assert (poster.status_code, poster["Content-Type"]) == (200, "image/jpeg")
    assert b"".join(poster.streaming_content)[:2] == b"\xff\xd8"


def test_default_video_from_a_setting(client: Client, media: Path, settings, video_file) -> None:
    settings.DEFAULT_VIDEO_PATH = str(video_file)

    video = gql(client, "{ defaultVideo { path width height } }")["data"]["defaultVideo"]

    assert video == {"path": "gallery/shapes.mp4", "width": 320, "height": 192}


def page(client: Client, **arguments: object) -> dict:
    declared = ", ".join(
        f"${k}: {'Int' if k in ('first', 'last') else 'String'}" for k in arguments
    )
    passed = ", ".join(f"{k}: ${k}" for k in arguments)
    query = (
        f"query Page({declared}) {{ videos({passed}) {{ "
        "pageInfo { hasNextPage hasPreviousPage startCursor endCursor } "
        "edges { cursor node { path } } } }"
        if arguments
        else "{ videos { pageInfo { hasNextPage hasPreviousPage startCursor endCursor } "
        "edges { cursor node { path } } } }"
    )
    return gql(client, query, **arguments)


def paths(result: dict) -> list[str]:
    return [edge["node"]["path"] for edge in result["data"]["videos"]["edges"]]


def info(result: dict) -> tuple[bool, bool]:
    page_info = result["data"]["videos"]["pageInfo"]
    return page_info["hasPreviousPage"], page_info["hasNextPage"]


def test_pages_forward_and_backward(client: Client) -> None:
    make_videos(5)

    first = page(client, first=2)
    assert paths(first) == ["gallery/v0.mp4", "gallery/v1.mp4"]
    assert info(first) == (False, True)
    end = first["data"]["videos"]["pageInfo"]["endCursor"]
    assert end == first["data"]["videos"]["edges"][-1]["cursor"]

    second = page(client, first=2, after=end)
    assert paths(second) == ["gallery/v2.mp4", "gallery/v3.mp4"]
    assert info(second) == (True, True)

    third = page(client, first=2, after=second["data"]["videos"]["pageInfo"]["endCursor"])
    assert paths(third) == ["gallery/v4.mp4"]
    assert info(third) == (True, False)

    last = page(client, last=2)
    assert paths(last) == ["gallery/v3.mp4", "gallery/v4.mp4"]
    assert info(last) == (True, False)

    before = page(client, last=2, before=last["data"]["videos"]["pageInfo"]["startCursor"])
    assert paths(before) == ["gallery/v1.mp4", "gallery/v2.mp4"]
    assert info(before) == (True, True)


def test_page_edge_cases(client: Client) -> None:
    videos = make_videos(3)
    cursor = {
        v.path: c
        for v, c in zip(
            videos, [e["cursor"] for e in page(client)["data"]["videos"]["edges"]], strict=True
        )
    }

    everything = page(client)
    assert paths(everything) == ["gallery/v0.mp4", "gallery/v1.mp4", "gallery/v2.mp4"]
    assert info(everything) == (False, False)
    assert info(page(client, first=3)) == (False, False)
    assert paths(page(client, first=0)) == []
    assert info(page(client, first=0)) == (False, True)
    assert info(page(client, last=0)) == (True, False)
    # after the last, nothing; the page before it holds everything else
    after_last = page(client, after=cursor["gallery/v2.mp4"])
    assert paths(after_last) == []
    assert info(after_last) == (True, False)
    assert paths(page(client, after=cursor["gallery/v0.mp4"], before=cursor["gallery/v2.mp4"])) == [
        "gallery/v1.mp4"
    ]
    empty = page(client, after=cursor["gallery/v1.mp4"], before=cursor["gallery/v2.mp4"])
    assert (paths(empty), info(empty)) == ([], (True, True))
    assert empty["data"]["videos"]["pageInfo"]["startCursor"] is None


def test_shared_videos_are_not_in_the_gallery(client: Client) -> None:
    make_videos(1)
    Video.objects.filter(path="gallery/v0.mp4").update(
        origin=Video.Origin.SHARED, path="shared/a.mp4"
    )

    assert paths(page(client)) == []
    shared = gql(client, '{ sharedVideo(path: "shared/a.mp4") { path url } }')
    assert shared["data"]["sharedVideo"] == {
        "path": "shared/a.mp4",
        "url": "http://testserver/media/shared/a.mp4",
    }


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"first": MAX_PAGE_SIZE + 1}, f"first must be within 0..{MAX_PAGE_SIZE}, got 101"),
        ({"last": -1}, f"last must be within 0..{MAX_PAGE_SIZE}, got -1"),
        ({"after": "nonsense"}, "after is not a cursor this server gave: 'nonsense'"),
        (
            {"before": to_global_id("Video", "1")},
            "before is not a cursor this server gave: 'VmlkZW86MQ=='",
        ),
    ],
)
def test_bad_page_arguments(client: Client, arguments: dict, message: str) -> None:
    result = page(client, **arguments)

    assert result["data"] is None
    assert result["errors"][0]["message"] == message
    assert result["errors"][0]["extensions"] == {"code": "BAD_USER_INPUT"}


@pytest.mark.parametrize(
    ("query", "message"),
    [
        ('{ sharedVideo(path: "gallery/v0.mp4") { path } }', "no shared video at 'gallery/v0.mp4'"),
        (
            '{ sharedVideo(path: "../../etc/passwd") { path } }',
            "no shared video at '../../etc/passwd'",
        ),
        ('{ node(id: "VmlkZW86OTk5") { id } }', "no object with id 'VmlkZW86OTk5'"),
        ("{ node(id: 42) { id } }", "no object with id '42'"),
    ],
)
def test_unknown_videos(client: Client, query: str, message: str) -> None:
    make_videos(1)

    result = gql(client, query)

    assert result["errors"][0]["message"] == message
    assert result["errors"][0]["extensions"] == {"code": "VIDEO_NOT_FOUND"}


def test_node_finds_a_video(client: Client) -> None:
    video = make_videos(1)[0]
    global_id = to_global_id("Video", str(video.pk))

    result = gql(client, f'{{ node(id: "{global_id}") {{ id ... on Video {{ path }} }} }}')

    assert result["data"]["node"] == {"id": global_id, "path": "gallery/v0.mp4"}


def test_video_default_service_keeps_one_row(media: Path) -> None:
    first, second = video_default(), video_default()

    assert first.pk == second.pk
    assert (media / "gallery" / "default.mp4").exists()
