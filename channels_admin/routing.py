"""ASGI routes of the channel admin served by consumers rather than Django views."""

from __future__ import annotations

from django.urls import path

from channels_admin.consumers import (
    DemoChannelConsumer,
    HlsPlaylistConsumer,
    HlsSegmentConsumer,
    StatusConsumer,
    TransportStreamConsumer,
)

http_urlpatterns = [
    path("ts", TransportStreamConsumer.as_asgi()),
    path("tv/demo/<int:number>.ts", DemoChannelConsumer.as_asgi()),
    path("hls/live.m3u8", HlsPlaylistConsumer.as_asgi()),
    path("hls/<str:name>", HlsSegmentConsumer.as_asgi()),
]

websocket_urlpatterns = [
    path("ws/tv/status", StatusConsumer.as_asgi()),
]
