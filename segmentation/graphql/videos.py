"""Queries on the video library: the default video, pages of the gallery, shared videos, nodes."""

from __future__ import annotations

import graphene

from segmentation.errors import VideoNotFound
from segmentation.graphql.types import (
    VIDEO_TYPE,
    GlobalID,
    Node,
    PageInfo,
    SharedVideo,
    Video,
    VideoConnection,
    VideoEdge,
)
from segmentation.models import Video as VideoModel
from segmentation.selectors import shared_video_get, video_cursor, video_of_id, videos_page
from segmentation.services.videos import video_default


def resolve_default_video(root: object, info: graphene.ResolveInfo) -> VideoModel:
    return video_default()


def resolve_videos(
    root: object,
    info: graphene.ResolveInfo,
    before: str | None = None,
    after: str | None = None,
    first: int | None = None,
    last: int | None = None,
) -> VideoConnection:
    page = videos_page(first=first, last=last, after=after, before=before)
    edges = [VideoEdge(cursor=video_cursor(video), node=video) for video in page.videos]
    return VideoConnection(
        page_info=PageInfo(
            has_next_page=page.has_next_page,
            has_previous_page=page.has_previous_page,
            start_cursor=edges[0].cursor if edges else None,
            end_cursor=edges[-1].cursor if edges else None,
        ),
        edges=edges,
    )


def resolve_shared_video(root: object, info: graphene.ResolveInfo, path: str) -> VideoModel:
    return shared_video_get(path=path)


def resolve_node(root: object, info: graphene.ResolveInfo, id: str) -> VideoModel:
    video = video_of_id(global_id=id, kind=VIDEO_TYPE)
    if video is None:
        raise VideoNotFound(f"no object with id {id!r}")
    return video


class VideoQueries(graphene.ObjectType):
    default_video = graphene.Field(
        Video,
        required=True,
        description="The video a new visitor starts with.",
        resolver=resolve_default_video,
    )
    videos = graphene.Field(
        VideoConnection,
        required=True,
        before=graphene.String(default_value=None, description="Only videos before this cursor."),
        after=graphene.String(default_value=None, description="Only videos after this cursor."),
        first=graphene.Int(default_value=None, description="The first N videos (at most 100)."),
        last=graphene.Int(default_value=None, description="The last N videos (at most 100)."),
        description="The gallery, a page at a time (Relay cursor pagination, oldest first).",
        resolver=resolve_videos,
    )
    shared_video = graphene.Field(
        SharedVideo,
        required=True,
        path=graphene.String(required=True, description="The shared video's path."),
        description="A video stored for sharing.",
        resolver=resolve_shared_video,
    )
    node = graphene.Field(
        Node,
        id=GlobalID(required=True, description="The object's global ID."),
        description="Any object by its global ID.",
        resolver=resolve_node,
    )
