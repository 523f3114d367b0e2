"""The object types of the segmentation API, named and shaped as the SAM 2 demo backend's."""

from __future__ import annotations

import graphene
from django.conf import settings
from graphql import StringValueNode
from graphql.language.ast import IntValueNode
from graphql_relay import to_global_id

from segmentation.models import Video as VideoModel

VIDEO_TYPE = "Video"


class GlobalID(graphene.Scalar):
    """An opaque object ID: a string; as input a string or an integer is accepted."""

    @staticmethod
    def serialize(value: object) -> str:
        return str(value)

    @staticmethod
    def parse_value(value: object) -> str:
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise ValueError("a GlobalID is a string or an integer")
        return str(value)

    @staticmethod
    def parse_literal(node: object, _variables: object = None) -> str:
        if isinstance(node, StringValueNode | IntValueNode):
            return node.value
        raise ValueError("a GlobalID is a string or an integer")


class Node(graphene.Interface):
    """An object with a global ID."""

    id = GlobalID(required=True, description="The object's global ID.")


def _absolute(info: graphene.ResolveInfo, relative: str) -> str:
    return info.context.build_absolute_uri(f"{settings.MEDIA_URL}{relative}")


class Video(graphene.ObjectType):
    """A video of the library that sessions can open."""

    class Meta:
        interfaces = (Node,)

    path = graphene.String(
        required=True, description="Where the video is, relative to the media folder."
    )
    poster_path = graphene.String(description="Where its poster (frame 0, JPEG) is.")
    width = graphene.Int(required=True, description="Width in pixels.")
    height = graphene.Int(required=True, description="Height in pixels.")
    frame_count = graphene.Int(
        required=True, description="How many frames it has (indices 0..frameCount-1)."
    )
    fps = graphene.Float(required=True, description="Frames per second.")
    url = graphene.String(required=True, description="Absolute URL of the video file.")
    poster_url = graphene.String(required=True, description="Absolute URL of the poster.")

    @classmethod
    def is_type_of(cls, root: object, info: graphene.ResolveInfo) -> bool:
        return isinstance(root, VideoModel)

    @staticmethod
    def resolve_id(video: VideoModel, info: graphene.ResolveInfo) -> str:
        return to_global_id(VIDEO_TYPE, str(video.pk))

    @staticmethod
    def resolve_url(video: VideoModel, info: graphene.ResolveInfo) -> str:
        return _absolute(info, video.path)

    @staticmethod
    def resolve_poster_url(video: VideoModel, info: graphene.ResolveInfo) -> str:
        return _absolute(info, video.poster_path)


class SharedVideo(graphene.ObjectType):
    """A video stored for sharing."""

    path = graphene.String(required=True, description="Its path, to pass to sharedVideo.")
    url = graphene.String(required=True, description="Absolute URL of the video file.")

    @staticmethod
    def resolve_url(video: VideoModel, info: graphene.ResolveInfo) -> str:
        return _absolute(info, video.path)


class PageInfo(graphene.ObjectType):
    """Where a page of a connection lies."""

    has_next_page = graphene.Boolean(
        required=True, description="Whether items exist after this page."
    )
    has_previous_page = graphene.Boolean(
        required=True, description="Whether items exist before this page."
    )
    start_cursor = graphene.String(description="The cursor of the page's first item.")
    end_cursor = graphene.String(description="The cursor of the page's last item.")


class VideoEdge(graphene.ObjectType):
    """A video in a page, with its cursor."""

    cursor = graphene.String(required=True, description="Pass as after/before to page on.")
    node = graphene.Field(Video, required=True, description="The video.")


class VideoConnection(graphene.ObjectType):
    """A page of videos."""

    page_info = graphene.Field(PageInfo, required=True, description="Where the page lies.")
    edges = graphene.List(
        graphene.NonNull(VideoEdge), required=True, description="The page's videos."
    )
