"""Upload mutations: videos for the gallery, videos to share, annotation files."""

from __future__ import annotations

import graphene
from django.core.files.uploadedfile import UploadedFile

from core.client_address import client_address
from segmentation.graphql.types import SharedVideo, Video
from segmentation.models import Video as VideoModel
from segmentation.services.consent import deletion_id_current
from segmentation.services.preparations import upload_owner
from segmentation.services.uploads import annotations_upload, shared_video_upload, video_upload


class Upload(graphene.Scalar):
    """A file part of the request (GraphQL multipart request specification); input only."""

    @staticmethod
    def serialize(value: object) -> None:
        return None

    @staticmethod
    def parse_value(value: object) -> UploadedFile:
        if not isinstance(value, UploadedFile):
            raise ValueError("an Upload is a file part of a multipart request")
        return value

    @staticmethod
    def parse_literal(node: object, _variables: object = None) -> None:
        raise ValueError("an Upload is a file part of a multipart request, not a literal")


def resolve_upload_video(
    root: object,
    info: graphene.ResolveInfo,
    file: UploadedFile,
    start_time_sec: float | None = None,
    duration_time_sec: float | None = None,
) -> VideoModel:
    return video_upload(
        file=file,
        start=start_time_sec,
        duration=duration_time_sec,
        owner=upload_owner(session=info.context.session, client=client_address(info.context)),
    )


def resolve_upload_shared_video(
    root: object, info: graphene.ResolveInfo, file: UploadedFile
) -> VideoModel:
    return shared_video_upload(
        file=file, deletion_id=deletion_id_current(session=info.context.session)
    )


def resolve_upload_annotations(
    root: object, info: graphene.ResolveInfo, file: UploadedFile
) -> bool:
    annotations_upload(file=file, deletion_id=deletion_id_current(session=info.context.session))
    return True


class UploadMutations(graphene.ObjectType):
    upload_video = graphene.Field(
        Video,
        required=True,
        file=Upload(required=True, description="The video file."),
        start_time_sec=graphene.Float(default_value=None, description="Where to start, seconds."),
        duration_time_sec=graphene.Float(
            default_value=None, description="How long, seconds (capped by the server)."
        ),
        description="Add a video to the gallery: transcoded to H.264 MP4 at 24 fps.",
        resolver=resolve_upload_video,
    )
    upload_shared_video = graphene.Field(
        SharedVideo,
        required=True,
        file=Upload(required=True, description="The video file."),
        description="Store a video for sharing; sharedVideo(path) gives it back.",
        resolver=resolve_upload_shared_video,
    )
    upload_annotations = graphene.Boolean(
        required=True,
        file=Upload(required=True, description="A JSON annotation file (the export format)."),
        description="Store annotations after checking them against their video.",
        resolver=resolve_upload_annotations,
    )
