"""The site's icon: ``/favicon.svg``, which every page of the site links, and ``/favicon.ico``,
which browsers ask for on pages that link none (the Django admin, GraphiQL) and which answered
404 on every page before (issue 48).

One drawing, made here: a panel of the site's colours holding a blue disc (a mask, the
segmentation) and a green play sign (the channels). The SVG is written from it, and the ICO is
drawn from it with OpenCV (a 32 x 32 PNG in an ICO container, which every browser reads), once.
Both are cached by browsers for a day, and revalidated by their ETag after that.
"""

from __future__ import annotations

import hashlib
import struct
from functools import cache

import cv2
import numpy as np
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import etag, require_safe

SIZE = 32  # the drawing's side, in pixels of the ICO
CORNER = 6
PANEL = (0x1A, 0x20, 0x27)  # site.css --panel
DISC = (0x4F, 0xA3, 0xFF)  # --accent
PLAY = (0x4C, 0xD9, 0x7B)  # --good
DISC_CENTRE, DISC_RADIUS = (13, 14), 8
PLAY_CORNERS = ((17, 16), (27, 22), (17, 28))
CACHE_CONTROL = "public, max-age=86400"
SUPERSAMPLING = 8  # the ICO is drawn this much larger, then scaled down for smooth edges


def _hex(colour: tuple[int, int, int]) -> str:
    return "#" + "".join(f"{channel:02x}" for channel in colour)


@cache
def favicon_svg_bytes() -> bytes:
    corners = " ".join(f"{x} {y}" for x, y in PLAY_CORNERS)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{SIZE}" height="{SIZE}"'
        f' viewBox="0 0 {SIZE} {SIZE}">'
        f'<rect width="{SIZE}" height="{SIZE}" rx="{CORNER}" fill="{_hex(PANEL)}"/>'
        f'<circle cx="{DISC_CENTRE[0]}" cy="{DISC_CENTRE[1]}" r="{DISC_RADIUS}"'
        f' fill="{_hex(DISC)}"/>'
        f'<path d="M{corners}Z" fill="{_hex(PLAY)}"/>'
        "</svg>\n"
    ).encode()


@cache
def favicon_ico_bytes() -> bytes:
    scale = SUPERSAMPLING
    side = SIZE * scale
    colour = np.zeros((side, side, 3), np.uint8)
    alpha = np.zeros((side, side), np.uint8)
    # the panel: a square with rounded corners, as the SVG's rect with rx
    r = CORNER * scale
    for shape in (colour, alpha):
        ink = _bgr(PANEL) if shape is colour else 255
        cv2.rectangle(shape, (r, 0), (side - 1 - r, side - 1), ink, cv2.FILLED)
        cv2.rectangle(shape, (0, r), (side - 1, side - 1 - r), ink, cv2.FILLED)
        for x in (r, side - 1 - r):
            for y in (r, side - 1 - r):
                cv2.circle(shape, (x, y), r, ink, cv2.FILLED, cv2.LINE_AA)
    centre = tuple(c * scale for c in DISC_CENTRE)
    cv2.circle(colour, centre, DISC_RADIUS * scale, _bgr(DISC), cv2.FILLED, cv2.LINE_AA)
    corners = np.array(PLAY_CORNERS, np.int32) * scale
    cv2.fillConvexPoly(colour, corners, _bgr(PLAY), cv2.LINE_AA)
    image = cv2.resize(np.dstack([colour, alpha]), (SIZE, SIZE), interpolation=cv2.INTER_AREA)
    ok, png = cv2.imencode(".png", image)
    if not ok:  # pragma: no cover (OpenCV encodes any 8-bit BGRA image)
        raise RuntimeError("the icon could not be encoded as PNG")
    return _ico(png.tobytes())


def _bgr(colour: tuple[int, int, int]) -> tuple[int, int, int]:
    red, green, blue = colour
    return blue, green, red


def _ico(png: bytes) -> bytes:
    """One PNG image in an ICO container: the header (reserved, type 1 = icon, one image) and
    its directory entry (size, no palette, 1 plane, 32 bits, length, offset past both)."""
    header = struct.pack("<HHH", 0, 1, 1)
    entry = struct.pack("<BBBBHHII", SIZE, SIZE, 0, 0, 1, 32, len(png), 6 + 16)
    return header + entry + png


def _etag(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


@require_safe
@etag(lambda request: _etag(favicon_ico_bytes()))
def favicon_ico(request: HttpRequest) -> HttpResponse:
    return _icon(favicon_ico_bytes(), "image/x-icon")


@require_safe
@etag(lambda request: _etag(favicon_svg_bytes()))
def favicon_svg(request: HttpRequest) -> HttpResponse:
    return _icon(favicon_svg_bytes(), "image/svg+xml")


def _icon(data: bytes, content_type: str) -> HttpResponse:
    response = HttpResponse(data, content_type=content_type)
    response["Cache-Control"] = CACHE_CONTROL
    return response
