from __future__ import annotations

from django.conf import settings
from django.urls import path

from segmentation.views.annotation_import import annotations_import
from segmentation.views.exports import (
    annotations_export,
    coco_instances,
    masks_archive,
    work_coco_instances,
    work_masks_archive,
    work_yolo_labels,
    yolo_labels,
)
from segmentation.views.media import frame_image, media_file
from segmentation.views.pages import annotate_page, gallery_page, video_names_view
from segmentation.views.propagation_jobs import (
    propagation_job_cancel,
    propagation_job_start,
    propagation_jobs_list,
)
from segmentation.views.session_info import session_engine_view, session_receipt_view
from segmentation.views.session_work import session_work_masks_view, session_work_view
from segmentation.views.stream import propagate_in_video
from segmentation.views.uploads import upload_view, uploads_view

urlpatterns = [
    path("", gallery_page, name="gallery"),
    path("annotate/", annotate_page, name="annotate"),
    path("videos/names", video_names_view, name="video_names"),
    path("uploads", uploads_view, name="uploads"),
    path("uploads/<uuid:upload_id>", upload_view, name="upload"),
    path("frames/<int:frame_index>.jpg", frame_image, name="frame_image"),
    path("annotations/masks.zip", masks_archive, name="masks_archive"),
    path("annotations/yolo.zip", yolo_labels, name="yolo_labels"),
    # Before the session's export, whose pattern the name would match.
    path("annotations/coco.json", coco_instances, name="coco_instances"),
    path("propagate_in_video", propagate_in_video, name="propagate_in_video"),
    path("annotations/<str:session_id>.json", annotations_export, name="annotations_export"),
    path("annotations/<str:session_id>/masks.zip", work_masks_archive, name="work_masks_archive"),
    path("annotations/<str:session_id>/coco.json", work_coco_instances, name="work_coco_instances"),
    path("annotations/<str:session_id>/yolo.zip", work_yolo_labels, name="work_yolo_labels"),
    path("sessions/<str:session_id>/annotations", annotations_import, name="annotations_import"),
    path("sessions/<str:session_id>/engine", session_engine_view, name="session_engine"),
    path("sessions/<str:session_id>/receipt", session_receipt_view, name="session_receipt"),
    path(
        "sessions/<str:session_id>/propagation", propagation_job_start, name="propagation_job_start"
    ),
    path("propagations", propagation_jobs_list, name="propagation_jobs"),
    path("propagations/<int:job_id>/cancel", propagation_job_cancel, name="propagation_job_cancel"),
    path("sessions/<str:session_id>/work", session_work_view, name="session_work"),
    path(
        "sessions/<str:session_id>/work/masks", session_work_masks_view, name="session_work_masks"
    ),
    # MEDIA_URL reads "/media/" at run time (Django adds the script prefix); routes have no "/".
    path(f"{settings.MEDIA_URL.strip('/')}/<path:path>", media_file, name="media"),
]
