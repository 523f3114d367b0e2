"""ASGI routes of the channel admin served by consumers rather than Django views."""

from __future__ import annotations

from django.urls import path

from channels_admin.consumers import DemoChannelConsumer, StatusConsumer, TransportStreamConsumer

http_urlpatterns = [
    path("ts", TransportStreamConsumer.as_asgi()),
    path("tv/demo/<int:number>.ts", DemoChannelConsumer.as_asgi()),
]

websocket_urlpatterns = [
    path("ws/tv/status", StatusConsumer.as_asgi()),
]
