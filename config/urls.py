"""Root URL configuration."""

from __future__ import annotations

from django.contrib import admin
from django.urls import include, path
from django.views.decorators.csrf import csrf_exempt

from edge.admin_login import ThrottledLoginForm, admin_login
from edge.docs_pages import docs_index, docs_missing, docs_page, docs_page_unsuffixed
from edge.favicon import favicon_ico, favicon_svg
from edge.graphql import ApiView
from edge.healthz import healthz

admin.site.login_form = ThrottledLoginForm

urlpatterns = [
    path("healthz", healthz, name="healthz"),
    path("docs/", docs_index, name="docs_index"),
    path("docs/<slug:name>.md", docs_page, name="docs_page"),
    path("docs/<slug:name>", docs_page_unsuffixed, name="docs_page_unsuffixed"),
    path("docs/<path:rest>", docs_missing, name="docs_missing"),
    # Browsers ask for /favicon.ico on pages that link no icon; the site's pages link the SVG.
    path("favicon.ico", favicon_ico, name="favicon_ico"),
    path("favicon.svg", favicon_svg, name="favicon_svg"),
    # Cross-origin API clients (the SAM 2 demo frontend) send no CSRF token.
    path("graphql", csrf_exempt(ApiView.as_view(graphiql=True)), name="graphql"),
    # Before the admin's own route to its login: failed logins are throttled (answered 429).
    path("admin/login/", admin_login, name="admin_login"),
    # Staff only: who holds which segmentation sessions (they live in memory, not in a table);
    # before the admin's own URLs, whose catch-all would answer first.
    path("admin/", include("segmentation.admin_urls")),
    path("admin/", admin.site.urls),
    path("", include("segmentation.urls")),
    path("", include("channels_admin.urls")),
]
