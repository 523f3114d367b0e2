"""The segmentation app's pages in the Django admin, beside the admin's own: who holds which
sessions (they live in memory, not in a table). Included under ``admin/`` before the admin's
URLs, whose catch-all would answer the path first."""

from __future__ import annotations

from django.contrib import admin
from django.urls import path

from segmentation.admin import sessions_admin

urlpatterns = [
    # Staff only, through the admin's own login.
    path(
        "segmentation/sessions/",
        admin.site.admin_view(sessions_admin),
        name="segmentation_sessions",
    ),
]
