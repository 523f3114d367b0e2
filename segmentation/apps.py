from __future__ import annotations

from django.apps import AppConfig


class SegmentationConfig(AppConfig):
    name = "segmentation"
    verbose_name = "Video segmentation"
