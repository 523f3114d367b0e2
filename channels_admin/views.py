"""The viewer and admin pages, and the admin JSON API.

Views parse, call one service or selector, and shape the answer.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from asgiref.sync import sync_to_async
from django.contrib.admin.views.decorators import staff_member_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_exempt, ensure_csrf_cookie
from django.views.decorators.http import require_GET

from channels_admin import selectors
from channels_admin.access import Denied, admin_access_check
from channels_admin.errors import BadRequest, ChannelsAdminError, MethodNotAllowed
from channels_admin.services.playlists import playlist_reload
from channels_admin.services.switch import channel_switch
from channels_admin.services.viewers import viewer_counts


def error_response(error: ChannelsAdminError | Denied) -> HttpResponse:
    """Every error answer of the API: its text, plain, with the status its code carries; made
    here so the texts never drift."""
    return HttpResponse(
        error.text, status=error.code.http_status, content_type="text/plain; charset=utf-8"
    )


def json_response(data: Any) -> JsonResponse:
    return JsonResponse(data, safe=False, json_dumps_params={"ensure_ascii": False})


def endpoint(method: str, *, admin: bool = True) -> Callable:
    """Accept only ``method`` (405 otherwise) and, for admin endpoints, only administrators."""

    def decorate(view: Callable) -> Callable:
        @csrf_exempt  # checked in admin_access_check, for cookie-authenticated requests only
        @functools.wraps(view)
        async def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if request.method != method:
                response = error_response(MethodNotAllowed(method))
                response["Allow"] = method
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
    return json_response({**status, **await viewer_counts()})


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


@require_GET
def viewer_page(request: HttpRequest) -> HttpResponse:
    return render(request, "channels_admin/viewer.html", {"nav": "tv"})


@require_GET
@staff_member_required
@ensure_csrf_cookie
def admin_page(request: HttpRequest) -> HttpResponse:
    return render(request, "channels_admin/admin.html", {"nav": "channels"})
