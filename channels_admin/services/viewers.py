"""Joining and leaving ``/ts`` and ``/hls/``: the one place that decides whether a viewer may
watch, and counts the viewers.

A viewer is refused while no channel is selected, while its private link is watched by its
most viewers (``streaming/link_audience.py``: ``/ts`` seats and HLS clients together, across
every process with Redis), and while this process has no room for it (the fixed cap or the
load guard, ``streaming/admission.py``); otherwise it gets a :class:`Subscription` to the hub,
which its consumer reads until the stream ends. An HLS viewer joins by asking for the playlist,
which starts the hub as a ``/ts`` viewer does. A status feed opened through a link is held
open until the link no longer admits viewers (:func:`status_feed_hold`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from channels.db import database_sync_to_async
from django.utils import timezone

from channels_admin import selectors
from channels_admin.runtime import AccessHolder, stream_runtime
from channels_admin.services.refusal import Refusal
from channels_admin.services.viewer_links import Admitted, viewer_access_check
from channels_admin.streaming.admission import RETRY_AFTER_SEC
from channels_admin.streaming.hls_output import TARGET_SECONDS
from channels_admin.streaming.hub import Hub
from channels_admin.streaming.relay import RelayError
from channels_admin.streaming.segment_signature import OPEN_LINK
from channels_admin.streaming.subscription import Subscription

# Until an administrator picks a channel; soon, as picking one takes a moment.
NO_CHANNEL_RETRY_AFTER_SEC = 5
# About a segment: the first one of a channel is ready this long after its first key frame.
HLS_STARTING_RETRY_AFTER_SEC = 2

logger = logging.getLogger(__name__)

# A link's viewers past its cap: a place may free up, so a player tries again.
LINK_FULL_RETRY_AFTER_SEC = 10
# An HLS client of a link counts this many target durations after its latest playlist: a
# player reloads it every target duration, and a reload may come late.
HLS_CLIENT_DURATIONS = 3
# Redis did not answer (a capped link's viewers cannot be counted across the processes): soon.
AUDIENCE_RETRY_AFTER_SEC = 2
AUDIENCE_UNAVAILABLE = Refusal(
    "this link's viewers cannot be counted now: try again shortly", AUDIENCE_RETRY_AFTER_SEC
)
# A signed segment URI lasts this many target durations (and this long at least): a player
# fetches what a playlist lists within about one, and reloads the playlist every one; but
# 2,000 clients on a loaded machine fetched some segments more than 6 s after their playlist,
# and each expired signature that reached the origin was one more origin request.
SEGMENT_SIGNATURE_DURATIONS = 6
SEGMENT_SIGNATURE_MIN_SEC = 12
SEGMENT_LINK_INVALID = Refusal(
    "this segment's link is not valid or has expired: reload the playlist", None, 403
)


NO_CHANNEL = Refusal(
    "no channel selected: an administrator must pick one first", NO_CHANNEL_RETRY_AFTER_SEC
)


async def viewer_join(*, token: str) -> Subscription | Refusal:
    """A new viewer's subscription to the stream, or why it may not have one now: while the
    stream is private, its private link (``token``) must admit it, with room under the link's
    cap (a seat taken, given back as it leaves); then the process must have room for it
    (counted by the admission)."""
    access = await _access_checked(token)
    if isinstance(access, Refusal):
        return access
    runtime = stream_runtime()
    hub = await runtime.hub()
    if hub.upstream is None:
        return NO_CHANNEL
    seated = False
    if access.link is not None:
        try:
            seated = await runtime.link_audience.seat_take(
                access.link, cap=access.max_viewers, window=_hls_window(hub)
            )
        except RelayError as error:
            logger.warning("link %d: its seats could not be counted: %s", access.link, error)
            if access.max_viewers is not None:
                return AUDIENCE_UNAVAILABLE  # over-admitting would break the cap
        else:
            if not seated:
                return _link_full(access)
    refusal = NO_CHANNEL if hub.upstream is None else None  # (the seat was awaited)
    if refusal is None and (refused := runtime.admission.refusal(hub.viewers)) is not None:
        refusal = Refusal(refused, RETRY_AFTER_SEC)
    if refusal is not None:
        if seated:
            await runtime.link_audience.seat_give(access.link)
        return refusal
    subscription = hub.subscribe(link=access.link)
    subscription.seated = seated
    return subscription


async def _access_checked(token: str) -> Admitted | Refusal:
    """What the viewer link of ``token`` admits now. A link this process's rule does not list
    yet (just made) is admitted here from then on, until the rule catches up."""
    access = await database_sync_to_async(viewer_access_check)(token=token)
    if not isinstance(access, Refusal) and access.link is not None:
        stream_runtime().link_checked(access.link, time.monotonic())
    return access


def _link_full(access: Admitted) -> Refusal:
    """The refusal of a viewer past its link's cap."""
    return Refusal(
        f"this link is watched by its most viewers ({access.max_viewers}): try again later",
        LINK_FULL_RETRY_AFTER_SEC,
        429,
    )


def _hls_window(hub: Hub) -> float:
    """How long an HLS client of a link counts after its latest playlist."""
    return HLS_CLIENT_DURATIONS * max(hub.hls.target_duration, TARGET_SECONDS)


async def viewer_leave(*, subscription: Subscription) -> None:
    """The viewer of ``subscription`` has gone. After a shutdown no hub is running and none is
    built for this: building one would open the upstream connection again."""
    runtime = stream_runtime()
    hub = runtime.running_hub
    if hub is not None:
        hub.unsubscribe(subscription)
    if subscription.seated:
        subscription.seated = False
        await runtime.link_audience.seat_give(subscription.link)


def status_feed_hold(*, feed: AccessHolder) -> None:
    """Close ``feed`` (a status feed opened through its link) when its link no longer admits
    viewers: revoked, expired, or none while the stream turned private."""
    stream_runtime().access_hold(feed)


def status_feed_release(*, feed: AccessHolder) -> None:
    stream_runtime().access_release(feed)


async def viewer_counts() -> dict[str, Any]:
    """``viewers``: every server process's ``/ts`` viewers and this process's HLS audience
    (``hls_viewers``, an estimate: the clients that fetched the latest segments, each cache in
    front counting once); whether this process is ``refusing_viewers`` now, how many it has
    refused (``viewers_refused``) and cut off when it could not carry them (``viewers_shed``)
    since it started."""
    runtime = stream_runtime()
    hub = await runtime.hub()
    admission = runtime.admission
    hls_viewers = hub.hls.viewers
    return {
        "viewers": await hub.viewers_total() + hls_viewers,
        "hls_viewers": hls_viewers,
        "refusing_viewers": admission.refusing(hub.viewers),
        "viewers_refused": admission.refused,
        "viewers_shed": admission.guard.shed if admission.guard is not None else 0,
    }


@dataclass(frozen=True)
class Playlist:
    """A playlist to answer with; ``shared``: a cache in front may answer it to others with the
    same URL. A capped link's is not: its origin must see each client's reloads to count it."""

    body: bytes
    shared: bool


async def hls_playlist(*, token: str, client: str) -> Playlist | Refusal:
    """The active channel's live HLS playlist, or why there is none now. Asking for it starts
    the hub (resuming the channel that was live before a restart), as a ``/ts`` viewer does, so
    an audience of HLS clients alone gets the channel. While the stream is private its private
    link (``token``) must admit the client (at the address ``client``): counted already, or
    with room under the link's cap. The segment URIs are signed for that link (for
    :data:`OPEN_LINK` while the stream is open), as nginx in front checks them."""
    access = await _access_checked(token)
    if isinstance(access, Refusal):
        return access
    runtime = stream_runtime()
    hub = await runtime.hub()
    if hub.upstream is None:
        return NO_CHANNEL
    playlist = hub.hls.playlist()
    if playlist is None:
        return Refusal("the channel is starting: no segment yet", HLS_STARTING_RETRY_AFTER_SEC)
    if access.link is not None:
        try:
            admitted = await runtime.link_audience.hls_admit(
                access.link, client, cap=access.max_viewers, window=_hls_window(hub)
            )
        except RelayError as error:
            logger.warning("link %d: its HLS clients could not be counted: %s", access.link, error)
            if access.max_viewers is not None:
                return AUDIENCE_UNAVAILABLE
        else:
            if not admitted:
                return _link_full(access)
    # signed while the stream is open too (link 0): nginx checks every segment request, not
    # knowing whether the stream is private
    link = OPEN_LINK if access.link is None else access.link
    ttl = max(SEGMENT_SIGNATURE_MIN_SEC, SEGMENT_SIGNATURE_DURATIONS * hub.hls.target_duration)
    body = runtime.segment_signer.playlist(playlist, link=link, now=time.time(), ttl=ttl)
    return Playlist(body=body, shared=access.max_viewers is None)


def hls_segment(*, name: str, query: Mapping[str, str]) -> bytes | Refusal | None:
    """The bytes of the HLS segment ``name`` (counted as one request for it), or None when it
    is unknown or gone. While the stream is private, ``query`` must hold a signature of it for
    a link that still admits viewers, as this process last learned (else a Refusal). No
    database, and no hub built for it: without one there is none."""
    runtime = stream_runtime()
    hub = runtime.running_hub
    if hub is None:
        return None
    rule = runtime.access_rule
    if not rule.private:
        return hub.hls.segment(name)
    link = runtime.segment_signer.link_of(name, query, now=time.time())
    if link is None or not runtime.admits(link):
        return SEGMENT_LINK_INVALID
    return hub.hls.segment(name)


# A revoked link stays in the status this long, while its viewers go.
REVOKED_SHOWN = timedelta(hours=1)


async def viewer_links_status() -> list[dict[str, Any]]:
    """The viewer links (``selectors.viewer_links_rows``) with the viewers through each, of
    every process with Redis: ``viewers`` (its ``/ts`` viewers and HLS clients) and
    ``hls_viewers`` (the client addresses that fetched its playlist within the window)."""
    rows = await database_sync_to_async(selectors.viewer_links_rows)(
        revoked_since=timezone.now() - REVOKED_SHOWN
    )
    runtime = stream_runtime()
    hub = await runtime.hub()
    links = [row["id"] for row in rows]
    try:
        counts = await runtime.link_audience.counts(links, window=_hls_window(hub))
    except RelayError as error:
        logger.warning("the links' viewers could not be counted: %s", error)
        counts = {link: (hub.viewers_of(link), 0) for link in links}  # this process's
    return [
        {
            **row,
            "viewers": sum(counts[row["id"]]),
            "hls_viewers": counts[row["id"]][1],
        }
        for row in rows
    ]
