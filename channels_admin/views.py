"""The viewer and admin pages, and the admin JSON API.

Views parse, call one service or selector, and shape the answer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.utils import timezone
from django.utils.dateparse import parse_datetime
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie
from django.views.decorators.http import require_GET

from channels_admin import selectors
from channels_admin.access import Denied, admin_access_check
from channels_admin.errors import (
    BadRequest,
    ChannelNotFound,
    ChannelsAdminError,
    MethodNotAllowed,
)
from channels_admin.models import ScheduleEntry
from channels_admin.services.guide import guide_refresh
from channels_admin.services.playlists import playlist_reload
from channels_admin.services.programme_entries import programme_entry_create
from channels_admin.services.refusal import Refusal
from channels_admin.services.schedule import (
    schedule_entry_create,
    schedule_entry_delete,
    schedule_entry_update,
)
from channels_admin.services.switch import channel_switch
from channels_admin.services.viewer_links import (
    CreatedLink,
    stream_private_set,
    viewer_access_check,
    viewer_link_create,
    viewer_link_revoke,
)
from channels_admin.services.viewers import viewer_counts, viewer_links_status


def error_response(error: ChannelsAdminError | Denied) -> HttpResponse:
    """Every error answer of the API: its text, plain, with the status its code carries; made
    here so the texts never drift."""
    return HttpResponse(
        error.text, status=error.code.http_status, content_type="text/plain; charset=utf-8"
    )


def json_response(data: Any) -> JsonResponse:
    return JsonResponse(data, safe=False, json_dumps_params={"ensure_ascii": False})


def endpoint(*methods: str, admin: bool = True) -> Callable:
    """Accept only ``methods`` (405 otherwise) and, for admin endpoints, only administrators."""

    def decorate(view: Callable) -> Callable:
        @csrf_exempt  # checked in admin_access_check, for cookie-authenticated requests only
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method not in methods:
                response = error_response(MethodNotAllowed(", ".join(methods)))
                response["Allow"] = ", ".join(methods)
                return response
            if admin:
                denied = await sync_to_async(admin_access_check)(request)
                if denied is not None:
                    return error_response(denied)
            return await view(request, *args, **kwargs)

        return wrapper

    return decorate


@endpoint("GET", admin=False)
async def config_view(request: HttpRequest) -> HttpResponse:
    return json_response({"player": "mpegts"})


@endpoint("GET")
async def channels_view(request: HttpRequest) -> HttpResponse:
    filters = {name: request.GET.get(name, "") for name in ("search", "group")}
    for name, value in filters.items():
        # SQLite matched every channel to a NUL and PostgreSQL refuses one in text: one answer
        if "\x00" in value:
            return error_response(BadRequest(f"{name} must not contain a NUL character"))
    channels = await sync_to_async(selectors.channels_search)(**filters)
    return json_response(channels)


@endpoint("GET")
async def groups_view(request: HttpRequest) -> HttpResponse:
    return json_response(await sync_to_async(selectors.groups_list)())


@endpoint("GET")
async def status_view(request: HttpRequest) -> HttpResponse:
    status = await sync_to_async(selectors.stream_status)()
    counts = await viewer_counts()
    return json_response({**status, **counts, "links": await viewer_links_status()})


@endpoint("POST")
async def private_view(request: HttpRequest) -> HttpResponse:
    try:
        private = _json_field(request.body, "private", bool)
    except BadRequest as error:
        return error_response(error)
    return json_response({"private": await sync_to_async(stream_private_set)(private=private)})


@csrf_exempt  # each method's endpoint checks access (and CSRF for a session's requests)
async def links_view(request: HttpRequest) -> HttpResponse:
    """``GET``: the links with their viewers; ``POST``: make one."""
    if request.method == "POST":
        return await link_create_view(request)
    return await links_list_view(request)


@endpoint("GET")
async def links_list_view(request: HttpRequest) -> HttpResponse:
    private = await sync_to_async(selectors.stream_private)()
    return json_response({"private": private, "links": await viewer_links_status()})


@endpoint("POST")
async def link_create_view(request: HttpRequest) -> HttpResponse:
    try:
        fields = _link_fields(request.body)
        created = await sync_to_async(viewer_link_create)(**fields)
    except BadRequest as error:
        return error_response(error)
    return json_response(_created(created, request))


@endpoint("POST")
async def link_revoke_view(request: HttpRequest, link_id: int) -> HttpResponse:
    try:
        link = await sync_to_async(viewer_link_revoke)(link_id=link_id)
    except ChannelsAdminError as error:
        return error_response(error)
    return json_response({"status": "ok", "id": link.pk, "revoked_at": link.revoked_at.isoformat()})


def _json_field(body: bytes, name: str, kind: type) -> Any:
    value = _json_object(body).get(name)
    if not isinstance(value, kind):
        raise BadRequest(f"{name} must be a {'boolean' if kind is bool else kind.__name__}")
    return value


def _link_fields(body: bytes) -> dict[str, Any]:
    """``name``, ``expires_at`` (ISO 8601 with a time zone, or null) and ``max_viewers`` (a
    whole number, or null) of a new link's body; else BadRequest."""
    data = _json_object(body)
    name, expires, cap = data.get("name"), data.get("expires_at"), data.get("max_viewers")
    if not isinstance(name, str):
        raise BadRequest("name must be a string")
    expires_at = None
    if expires is not None:
        readable = isinstance(expires, str) and len(expires) <= 40
        expires_at = parse_datetime(expires) if readable else None
        if expires_at is None or expires_at.tzinfo is None:
            raise BadRequest("expires_at must be an ISO 8601 time with a time zone, or null")
    if cap is not None and (isinstance(cap, bool) or not isinstance(cap, int)):
        raise BadRequest("max_viewers must be a whole number, or null")
    return {"name": name, "expires_at": expires_at, "max_viewers": cap}


def _created(created: CreatedLink, request: HttpRequest) -> dict[str, Any]:
    link = created.link
    return {
        "id": link.pk,
        "name": link.name,
        "expires_at": link.expires_at.isoformat() if link.expires_at else None,
        "max_viewers": link.max_viewers,
        "token": created.token,
        "url": request.build_absolute_uri(created.path),
    }


@endpoint("POST")
async def channel_select_view(request: HttpRequest) -> HttpResponse:
    try:
        channel = await channel_switch(channel_id=_channel_id(request.body))
    except ChannelsAdminError as error:
        return error_response(error)
    return json_response({"status": "ok", "channel": channel.name})


def _channel_id(body: bytes) -> str:
    """The ``channel_id`` of a ``{"channel_id": "..."}`` body; else BadRequest."""
    try:
        channel_id = json.loads(body)["channel_id"]
    except (ValueError, TypeError, KeyError, RecursionError):  # RecursionError: nested too deep
        raise BadRequest("invalid json") from None
    if not isinstance(channel_id, str):
        raise BadRequest("invalid json")
    return channel_id


@endpoint("POST")
async def playlist_reload_view(request: HttpRequest) -> HttpResponse:
    try:
        result = await sync_to_async(playlist_reload)()
    except ChannelsAdminError as error:
        return error_response(error)
    return json_response({"status": "ok", "channels": result.channels})


@endpoint("POST")
async def guide_refresh_view(request: HttpRequest) -> HttpResponse:
    try:
        # not the thread the views share: a large guide takes a minute
        result = await sync_to_async(guide_refresh, thread_sensitive=False)()
    except ChannelsAdminError as error:
        return error_response(error)
    return json_response(
        {"status": "ok", "channels": result.channels, "programmes": result.programmes}
    )


CHANNEL_ID_MAX = 300  # Channel.channel_id's length: a longer one names no channel


@endpoint("GET")
async def guide_programmes_view(request: HttpRequest) -> HttpResponse:
    """A channel's programmes of the guide that have not ended (``?channel_id=``)."""
    channel_id = request.GET.get("channel_id", "")
    if not channel_id or len(channel_id) > CHANNEL_ID_MAX or "\x00" in channel_id:
        return error_response(BadRequest(f"channel_id must be 1 to {CHANNEL_ID_MAX} characters"))
    channel = await sync_to_async(selectors.playlist_channel)(channel_id=channel_id)
    if channel is None:
        return error_response(ChannelNotFound(channel_id))
    programmes = await sync_to_async(selectors.guide_programmes)(
        channel=channel, now=timezone.now()
    )
    return json_response(programmes)


@endpoint("POST")
async def schedule_programme_view(request: HttpRequest) -> HttpResponse:
    """A new entry playing a programme of the guide: ``{"channel_id", "start"}`` (as the
    programmes' list gives them) and, optionally, the ``guide_version`` it was picked from."""
    try:
        entry = await programme_entry_create(**_programme_fields(request.body))
    except ChannelsAdminError as error:
        return error_response(error)
    return json_response(await _entry_json(entry))


def _programme_fields(body: bytes) -> dict[str, Any]:
    data = _json_object(body)
    channel_id, start = data.get("channel_id"), data.get("start")
    version = data.get("guide_version")
    if not isinstance(channel_id, str) or not 0 < len(channel_id) <= CHANNEL_ID_MAX:
        raise BadRequest(f"channel_id must be text of 1 to {CHANNEL_ID_MAX} characters")
    at = parse_datetime(start) if isinstance(start, str) and len(start) <= 40 else None
    if at is None or at.tzinfo is None:
        raise BadRequest("start must be an ISO 8601 time with a time zone")
    if version is not None and (isinstance(version, bool) or not isinstance(version, int)):
        raise BadRequest("guide_version must be a whole number, or null")
    return {"channel_id": channel_id, "start": at, "guide_version": version}


@endpoint("GET", "POST")
async def schedule_view(request: HttpRequest) -> HttpResponse:
    """GET: the schedule (entries, next switches, latest switches); POST: a new entry."""
    if request.method == "GET":
        overview = await sync_to_async(selectors.schedule_overview)(now=timezone.now())
        return json_response(overview)
    try:
        entry = await schedule_entry_create(values=_json_object(request.body))
    except ChannelsAdminError as error:
        return error_response(error)
    return json_response(await _entry_json(entry))


@endpoint("PATCH", "DELETE")
async def schedule_entry_view(request: HttpRequest, entry_id: int) -> HttpResponse:
    """PATCH: change the fields given; DELETE: remove the entry."""
    try:
        if request.method == "DELETE":
            await schedule_entry_delete(entry_id=entry_id)
            return json_response({"status": "ok"})
        entry = await schedule_entry_update(entry_id=entry_id, values=_json_object(request.body))
    except ChannelsAdminError as error:
        return error_response(error)
    return json_response(await _entry_json(entry))


def _json_object(body: bytes) -> dict[str, Any]:
    """The JSON object ``body`` holds; else BadRequest."""
    try:
        values = json.loads(body)
    except (ValueError, RecursionError):  # RecursionError: nested too deep
        raise BadRequest("invalid json") from None
    if not isinstance(values, dict):
        raise BadRequest("invalid json: an object is expected")
    return values


async def _entry_json(entry: ScheduleEntry) -> dict[str, Any]:
    name = await sync_to_async(selectors.channel_name)(channel_id=entry.channel_id)
    return selectors.schedule_entry_json(entry, channel_name=name)


@require_GET
def viewer_page(request: HttpRequest) -> HttpResponse:
    """The TV page; while the stream is private, only with a link that admits viewers (else
    the page says why, with the refusal's status, and plays nothing)."""
    access = viewer_access_check(token=request.GET.get("t", ""))
    if isinstance(access, Refusal):
        context = {"nav": "tv", "refused": access.reason}
        return render(request, "channels_admin/viewer.html", context, status=access.status)
    context = {"nav": "tv", "overlay_shown_ms": settings.CHANNELS_OVERLAY_SEC * 1000}
    return render(request, "channels_admin/viewer.html", context)


@require_GET
@staff_member_required
@ensure_csrf_cookie
def admin_page(request: HttpRequest) -> HttpResponse:
    return render(request, "channels_admin/admin.html", {"nav": "channels"})
