from __future__ import annotations

from django.conf import settings
from django.urls import path

from segmentation.views import media_file

urlpatterns = [
    # MEDIA_URL reads "/media/" at run time (Django adds the script prefix); routes have no "/".
    path(f"{settings.MEDIA_URL.strip('/')}/<path:path>", media_file, name="media"),
]
