"""A programme guide provider on loopback: serves XMLTV documents the test writes, plain or
gzip, and an XMLTV writer for them."""

from __future__ import annotations

import gzip
import http.server
import threading
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from xml.sax.saxutils import escape, quoteattr

from loopback_fakes.server import LoopbackServer


@dataclass(frozen=True)
class Show:
    """A programme to write: its channel's guide ID, times, title."""

    channel: str
    start: datetime
    stop: datetime
    title: str
    subtitle: str = ""


def xmltv_time(at: datetime) -> str:
    """``20261127190000 +0100``: the time in its own offset, as guides write it."""
    return at.strftime("%Y%m%d%H%M%S %z")


def xmltv_document(channels: Iterable[tuple[str, list[str], str]], shows: Iterable[Show]) -> bytes:
    """A guide of ``(id, display names, icon)`` channels and ``shows``."""
    parts = ['<?xml version="1.0" encoding="UTF-8"?>\n<!DOCTYPE tv SYSTEM "xmltv.dtd">\n<tv>\n']
    for channel_id, names, icon in channels:
        parts.append(f"  <channel id={quoteattr(channel_id)}>")
        parts += [f'<display-name lang="en">{escape(name)}</display-name>' for name in names]
        if icon:
            parts.append(f"<icon src={quoteattr(icon)}/>")
        parts.append("</channel>\n")
    for show in shows:
        parts.append(
            f"  <programme start={quoteattr(xmltv_time(show.start))} "
            f"stop={quoteattr(xmltv_time(show.stop))} channel={quoteattr(show.channel)}>"
            f'<title lang="en">{escape(show.title)}</title>'
            + (f"<sub-title>{escape(show.subtitle)}</sub-title>" if show.subtitle else "")
            + "</programme>\n"
        )
    parts.append("</tv>\n")
    return "".join(parts).encode()


class XmltvOrigin:
    """Serves ``documents[path]`` (``/guide.xml``; a path ending ``.gz`` gets it gzipped, as
    ``application/gzip``); ``status`` other than 200 answers that with no guide. ``requests``
    counts the GETs per path."""

    def __init__(self) -> None:
        self.documents: dict[str, bytes] = {}
        self.status = 200
        self.requests: dict[str, int] = {}
        self._lock = threading.Lock()
        self._server = LoopbackServer(self._answer)

    def url(self, path: str) -> str:
        return self._server.url(path)

    def _answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        with self._lock:
            self.requests[handler.path] = self.requests.get(handler.path, 0) + 1
        plain = handler.path.removesuffix(".gz")
        body = self.documents.get(plain)
        if self.status != 200 or body is None:
            handler.send_response(self.status if self.status != 200 else 404)
            handler.send_header("Content-Length", "0")
            handler.end_headers()
            return
        kind = "application/xml"
        if handler.path.endswith(".gz"):
            body, kind = gzip.compress(body), "application/gzip"
        handler.send_response(200)
        handler.send_header("Content-Type", kind)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    def close(self) -> None:
        self._server.close()
