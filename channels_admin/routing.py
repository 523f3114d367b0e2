"""ASGI routes of the channel admin served by consumers rather than Django views."""

from __future__ import annotations

from django.urls import path

from channels_admin.consumers import TransportStreamConsumer

http_urlpatterns = [
    path("ts", TransportStreamConsumer.as_asgi()),
]
