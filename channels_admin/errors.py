"""Typed failures of the channel admin service; each view maps them to one fixed response."""

from __future__ import annotations


class ChannelsAdminError(Exception):
    pass


class ChannelNotFound(ChannelsAdminError):
    pass


class PlaylistReloadError(ChannelsAdminError):
    """The playlist could not be downloaded, read or parsed; nothing was changed."""


class UnsupportedStream(ChannelsAdminError):
    """The channel's stream is not an http or https URL, the only kinds the hub relays."""
