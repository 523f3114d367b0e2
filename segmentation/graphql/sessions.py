"""Mutations on segmentation sessions: open and close them, click, clear, remove, cancel; and
the masks they answer with."""

from __future__ import annotations

import graphene

from core.client_address import client_address
from core.server_timing import server_timing_add
from segmentation.services import sessions as services
from segmentation.services.consent import owner_key
from segmentation.services.session_types import Clicks, FrameMasks


class RLEMask(graphene.ObjectType):
    """A mask as COCO run-length encoding of the column-major H x W mask."""

    size = graphene.List(graphene.NonNull(graphene.Int), required=True, description="[H, W].")
    counts = graphene.String(required=True, description="The COCO RLE string.")
    order = graphene.String(required=True, description='Always "F" (column-major).')


class RLEMaskForObject(graphene.ObjectType):
    """One object's mask."""

    object_id = graphene.Int(required=True, description="The object.")
    rle_mask = graphene.Field(RLEMask, required=True, description="Its mask.")


class RLEMaskListOnFrame(graphene.ObjectType):
    """Every object's mask on one frame."""

    frame_index = graphene.Int(required=True, description="The frame.")
    rle_mask_list = graphene.List(
        graphene.NonNull(RLEMaskForObject), required=True, description="The masks, by object."
    )


def masks_on_frame(frame: FrameMasks) -> RLEMaskListOnFrame:
    return RLEMaskListOnFrame(
        frame_index=frame.frame_index,
        rle_mask_list=[
            RLEMaskForObject(object_id=mask.object_id, rle_mask=RLEMask(order="F", **mask.rle))
            for mask in frame.objects
        ],
    )


class StartSessionInput(graphene.InputObjectType):
    """The video to open a session on."""

    path = graphene.String(required=True, description="The video's path, as Video.path gives.")


class SessionInput:
    session_id = graphene.String(required=True, description="The session.")


class CloseSessionInput(SessionInput, graphene.InputObjectType):
    """The session to close."""


class ClearPointsInVideoInput(SessionInput, graphene.InputObjectType):
    """The session whose points (and objects) to forget."""


class CancelPropagateInVideoInput(SessionInput, graphene.InputObjectType):
    """The session whose propagation to stop."""


class AddPointsInput(SessionInput, graphene.InputObjectType):
    """Clicks for one object on one frame."""

    frame_index = graphene.Int(required=True, description="The frame clicked on.")
    clear_old_points = graphene.Boolean(
        required=True, description="Replace the object's earlier points on this frame."
    )
    object_id = graphene.Int(required=True, description="The object the points are for.")
    labels = graphene.List(
        graphene.NonNull(graphene.Int),
        required=True,
        description=(
            "Per point: 1 the object is here, 0 it is not; 2 and 3 a box's top-left and "
            "bottom-right corners, first in the list (at most one box, and only with "
            "clearOldPoints)."
        ),
    )
    points = graphene.List(
        graphene.NonNull(graphene.List(graphene.NonNull(graphene.Float))),
        required=True,
        description="[x, y] per point, normalized to [0, 1] by the video's width and height.",
    )


class ClearPointsInFrameInput(SessionInput, graphene.InputObjectType):
    """An object's points on one frame."""

    frame_index = graphene.Int(required=True, description="The frame.")
    object_id = graphene.Int(required=True, description="The object.")


class RemoveObjectInput(SessionInput, graphene.InputObjectType):
    """The object to remove."""

    object_id = graphene.Int(required=True, description="The object.")


class StartSession(graphene.ObjectType):
    """A new session."""

    session_id = graphene.String(required=True, description="Its ID, for every later call.")


class CloseSession(graphene.ObjectType):
    """Whether the session was closed."""

    success = graphene.Boolean(required=True, description="False if no such session lived.")


class ClearPointsInVideo(graphene.ObjectType):
    """Whether the session was reset."""

    success = graphene.Boolean(required=True, description="True once every point is gone.")


class CancelPropagateInVideo(graphene.ObjectType):
    """Whether the cancel was sent."""

    success = graphene.Boolean(
        required=True, description="True: the propagation stops at its next frame."
    )


KEEP_WORK_HEADER = "X-Keep-Work"


def resolve_start_session(root, info, input: StartSessionInput) -> StartSession:
    request = info.context
    # The annotator asks for its work to be kept and given back (services/work_store.py); the
    # SAM 2 demo frontend, which knows nothing of it, does not: a session of its starts empty.
    keep = request.headers.get(KEEP_WORK_HEADER) == "1"
    owner = owner_key(session=request.session) if keep else ""
    session_id = services.session_start(
        path=input.path, client=client_address(request), owner=owner
    )
    return StartSession(session_id=session_id)


def resolve_close_session(root, info, input: CloseSessionInput) -> CloseSession:
    return CloseSession(success=services.session_close(session_id=input.session_id))


def resolve_add_points(root, info, input: AddPointsInput) -> RLEMaskListOnFrame:
    clicks = Clicks(
        frame_index=input.frame_index,
        object_id=input.object_id,
        points=input.points,
        labels=input.labels,
        clear_old_points=input.clear_old_points,
    )
    result = services.session_add_points(session_id=input.session_id, clicks=clicks)
    server_timing_add(info.context, "engine", result.engine_seconds)
    return masks_on_frame(result)


def resolve_clear_points_in_frame(
    root,
    info,
    input: ClearPointsInFrameInput,
) -> RLEMaskListOnFrame:
    return masks_on_frame(
        services.session_clear_points_in_frame(
            session_id=input.session_id, frame_index=input.frame_index, object_id=input.object_id
        )
    )


def resolve_clear_points_in_video(
    root,
    info,
    input: ClearPointsInVideoInput,
) -> ClearPointsInVideo:
    services.session_clear_points_in_video(session_id=input.session_id)
    return ClearPointsInVideo(success=True)


def resolve_remove_object(root, info, input: RemoveObjectInput) -> list[RLEMaskListOnFrame]:
    frames = services.session_remove_object(session_id=input.session_id, object_id=input.object_id)
    return [masks_on_frame(frame) for frame in frames]


def resolve_cancel_propagate_in_video(
    root,
    info,
    input: CancelPropagateInVideoInput,
) -> CancelPropagateInVideo:
    return CancelPropagateInVideo(
        success=services.session_cancel_propagation(session_id=input.session_id)
    )


def _field(output, input_type, description: str, resolver) -> graphene.Field:
    return graphene.Field(
        output,
        input=input_type(required=True, description="What to act on."),
        description=description,
        resolver=resolver,
    )


class SessionMutations(graphene.ObjectType):
    start_session = _field(
        graphene.NonNull(StartSession),
        StartSessionInput,
        "Open a session on a video of the library.",
        resolve_start_session,
    )
    close_session = _field(
        graphene.NonNull(CloseSession),
        CloseSessionInput,
        "Close a session and free what it holds.",
        resolve_close_session,
    )
    add_points = _field(
        graphene.NonNull(RLEMaskListOnFrame),
        AddPointsInput,
        "Click points for an object on a frame; every object's mask on that frame.",
        resolve_add_points,
    )
    clear_points_in_frame = _field(
        graphene.NonNull(RLEMaskListOnFrame),
        ClearPointsInFrameInput,
        "Forget an object's points on a frame; every object's mask on that frame.",
        resolve_clear_points_in_frame,
    )
    clear_points_in_video = _field(
        graphene.NonNull(ClearPointsInVideo),
        ClearPointsInVideoInput,
        "Forget every point and object of the session.",
        resolve_clear_points_in_video,
    )
    remove_object = _field(
        graphene.NonNull(graphene.List(graphene.NonNull(RLEMaskListOnFrame))),
        RemoveObjectInput,
        "Remove an object; the masks of the frames where it had points, without it.",
        resolve_remove_object,
    )
    cancel_propagate_in_video = _field(
        graphene.NonNull(CancelPropagateInVideo),
        CancelPropagateInVideoInput,
        "Stop the session's running propagation at its next frame.",
        resolve_cancel_propagate_in_video,
    )
