"""Private viewing: the stream made private or open, viewer links made and revoked, who a
link admits, and telling every process when that changes.

While the stream is private (:attr:`StreamState.private`), ``/ts``, ``/hls/live.m3u8``, the TV
page and its status feed want a viewer link's token (``?t=TOKEN``). A link admits viewers until
it expires or is revoked, up to its cap at once (``services/viewers.py``). Each process follows
the rule (:class:`ViewerLinkAccess`, which the app hands to the runtime): a change is announced
on a channel-layer group, so with several processes (``REDIS_URL``) every one hears it, and
each re-reads the links then, at the next expiry, and every ``RULES_REREAD_SEC`` in case an
announcement was lost; the runtime cuts off the viewers the new rule no longer admits.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import hmac
import secrets
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from asgiref.sync import async_to_sync
from channels.db import database_sync_to_async
from channels.layers import get_channel_layer
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from channels_admin.errors import BadRequest, LinkNotFound
from channels_admin.models import StreamState, ViewerLink
from channels_admin.runtime import AccessRule
from channels_admin.services.announcements import group_announce, group_join, group_leave
from channels_admin.services.refusal import Refusal

# Channel-layer group of every process's access follower.
ACCESS_GROUP = "viewer-access"
# A process re-reads the rule this often even if no change was announced (one was lost).
RULES_REREAD_SEC = 30.0
TOKEN_BYTES = 32
# Longer than any token made (43 characters): refused without a look at the database.
TOKEN_MAX_CHARS = 64
NAME_MAX_CHARS = 100
MAX_VIEWERS_CAP = 1_000_000
LONGEST_EXPIRY = timedelta(days=3650)

LINK_NEEDED = Refusal("this stream is private: open it with the link you were given", None, 401)
LINK_INVALID = Refusal("this link is not valid", None, 403)
LINK_REVOKED = Refusal("this link was revoked", None, 403)
LINK_EXPIRED = Refusal("this link has expired", None, 403)


@dataclass(frozen=True)
class Admitted:
    """A viewer let in: through the viewer ``link`` (None: the stream is open), capped at
    ``max_viewers`` at once (None: no cap)."""

    link: int | None = None
    max_viewers: int | None = None


OPEN = Admitted()


@dataclass(frozen=True)
class CreatedLink:
    """A new link and its token, which is shown this once: only its hash is kept."""

    link: ViewerLink
    token: str

    @property
    def path(self) -> str:
        return f"/tv/?t={self.token}"


def token_digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def viewer_access_check(*, token: str) -> Admitted | Refusal:
    """Whether a viewer with ``token`` ("" for none) may watch now, and through which link.

    A token costs one hash and one lookup by that hash on a unique index: what a guess learns
    from the time taken is about the hash, not the token, and the stored hash is compared in
    constant time all the same."""
    if not StreamState.objects.filter(pk=StreamState.SINGLETON_PK, private=True).exists():
        return OPEN
    if not token:
        return LINK_NEEDED
    if len(token) > TOKEN_MAX_CHARS:
        return LINK_INVALID
    digest = token_digest(token)
    link = ViewerLink.objects.filter(token_hash=digest).first()
    if link is None or not hmac.compare_digest(link.token_hash, digest):
        return LINK_INVALID
    if link.revoked_at is not None:
        return LINK_REVOKED
    if not link.admits_at(timezone.now()):
        return LINK_EXPIRED
    return Admitted(link=link.pk, max_viewers=link.max_viewers)


def stream_private_set(*, private: bool) -> bool:
    """Make the stream private or open; told to every process (whose viewers without a link
    are cut off when it turns private)."""
    with transaction.atomic():
        StreamState.objects.get_or_create(pk=StreamState.SINGLETON_PK)
        StreamState.objects.filter(pk=StreamState.SINGLETON_PK).update(private=private)
    access_changed()
    return private


def viewer_link_create(
    *, name: str, expires_at: datetime | None = None, max_viewers: int | None = None
) -> CreatedLink:
    """A new viewer link; BadRequest for a name, expiry or cap out of bounds, or past
    ``CHANNELS_MAX_VIEWER_LINKS`` links that are not revoked."""
    name = name.strip()
    viewer_link_fields_check(name=name, expires_at=expires_at, max_viewers=max_viewers)
    token = secrets.token_urlsafe(TOKEN_BYTES)
    with transaction.atomic():
        live = ViewerLink.objects.select_for_update().filter(revoked_at__isnull=True)
        if live.count() >= settings.CHANNELS_MAX_VIEWER_LINKS:
            raise BadRequest(
                f"there are {settings.CHANNELS_MAX_VIEWER_LINKS} links already: revoke one first"
            )
        link = ViewerLink.objects.create(
            name=name,
            token_hash=token_digest(token),
            expires_at=expires_at,
            max_viewers=max_viewers,
        )
    access_changed()
    return CreatedLink(link=link, token=token)


def viewer_link_fields_check(
    *, name: str, expires_at: datetime | None, max_viewers: int | None
) -> None:
    """BadRequest for a link's name, expiry or cap out of bounds."""
    now = timezone.now()
    if not name or len(name) > NAME_MAX_CHARS or "\x00" in name:
        raise BadRequest(f"name must be 1 to {NAME_MAX_CHARS} characters")
    if expires_at is not None and not now < expires_at <= now + LONGEST_EXPIRY:
        raise BadRequest("expires_at must be in the future, within ten years")
    if max_viewers is not None and not 1 <= max_viewers <= MAX_VIEWERS_CAP:
        raise BadRequest(f"max_viewers must be 1 to {MAX_VIEWERS_CAP:,}, or null")


def viewer_link_revoke(*, link_id: int) -> ViewerLink:
    """Revoke a link: its viewers are cut off (in every process) and its token refused.
    Revoking one revoked already changes nothing."""
    updated = ViewerLink.objects.filter(pk=link_id, revoked_at__isnull=True).update(
        revoked_at=timezone.now()
    )
    link = ViewerLink.objects.filter(pk=link_id).first()
    if link is None:
        raise LinkNotFound(str(link_id))
    if updated:
        access_changed()
    return link


def access_changed() -> None:
    """Tell every process's access follower to read the rule afresh (after the change is
    committed: a follower reading before would miss it), as best it can: a follower that
    misses it reads the rule again within ``RULES_REREAD_SEC``."""
    transaction.on_commit(
        lambda: async_to_sync(group_announce)(ACCESS_GROUP, {"type": "access.changed"})
    )


def access_rule_read() -> tuple[AccessRule, datetime | None]:
    """The rule now, and when it next changes by itself (a link's expiry), if ever."""
    read_at = time.monotonic()
    private = StreamState.objects.filter(pk=StreamState.SINGLETON_PK, private=True).exists()
    now = timezone.now()
    links: set[int] = set()
    next_expiry = None
    for pk, expires_at in ViewerLink.objects.filter(revoked_at__isnull=True).values_list(
        "pk", "expires_at"
    ):
        if expires_at is None or expires_at > now:
            links.add(pk)
            if expires_at is not None and (next_expiry is None or expires_at < next_expiry):
                next_expiry = expires_at
    return AccessRule(private=private, links=frozenset(links), read_at=read_at), next_expiry


class ViewerLinkAccess:
    """The rule, as the runtime follows it (``runtime.ViewerAccess``): read now, then again
    when a change is announced, when a link expires, and every ``RULES_REREAD_SEC``."""

    async def rules(self) -> AsyncIterator[AccessRule]:
        layer = get_channel_layer()
        channel = await layer.new_channel() if layer is not None else None
        try:
            while True:
                if channel is not None:  # (again each round: a group forgets its members)
                    await group_join(ACCESS_GROUP, channel)
                rule, next_expiry = await database_sync_to_async(access_rule_read)()
                yield rule
                wait = RULES_REREAD_SEC
                if next_expiry is not None:
                    wait = min(wait, (next_expiry - timezone.now()).total_seconds() + 0.01)
                await _announced_or_timeout(layer, channel, max(wait, 0.01))
        finally:
            if channel is not None:
                await group_leave(ACCESS_GROUP, channel)


async def _announced_or_timeout(layer: object, channel: str | None, seconds: float) -> None:
    if channel is None:
        await asyncio.sleep(seconds)
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(layer.receive(channel), seconds)
