from __future__ import annotations

from django.apps import AppConfig


class ChannelsAdminConfig(AppConfig):
    name = "channels_admin"
    verbose_name = "IPTV channels"
