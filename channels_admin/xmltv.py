"""XMLTV (programme guide) parsing, streamed from a file on disk.

An XMLTV guide is one ``<tv>`` element holding ``<channel id="...">`` elements (display names,
an icon) and ``<programme channel="..." start="..." stop="...">`` elements (a title, a
sub-title, a description). Guides are large (a provider's week of 10,000 channels is 100 MB) and
come from strangers, so the parser never holds the document: the C expat parser feeds a target
of our own (:class:`_GuideTarget`) that keeps only the fields wanted, each cut to its bound as
it arrives, and hands over each channel and programme as its end tag passes. Memory is one
record and one read chunk, whatever the file.

Hostile guides are refused with a sentence (:class:`XMLTVParseError`, the only exception raised):

- entity declarations (``<!ENTITY``): no guide needs them, and they are how a few hundred bytes
  expand into gigabytes ("billion laughs"). Expat 2.4+ limits amplification itself; a guide
  that declares entities is refused before the parser sees the declaration anyway. External
  entities and DTDs are never fetched (ElementTree's parser does not);
- more than ``max_bytes`` of XML (counted after gzip, so a small bomb cannot inflate unseen);
- elements nested deeper than :data:`MAX_DEPTH` (XMLTV needs four).

A gzip file is recognised by its magic bytes, whatever its name or content type.
"""

from __future__ import annotations

import gzip
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from typing import BinaryIO
from xml.etree.ElementTree import ParseError, XMLParser

__all__ = [
    "GuideChannel",
    "GuideProgramme",
    "XMLTVParseError",
    "xmltv_parse",
    "xmltv_time_parse",
]

MAX_DEPTH = 16
READ_CHUNK = 1024 * 1024
# Field bounds: a title or a name longer than this is cut, a description too.
NAME_MAX = 300
TITLE_MAX = 300
DESC_MAX = 1000
ID_MAX = 300
ICON_MAX = 2000

_GZIP_MAGIC = b"\x1f\x8b"
_ENTITY_DECLARATION = b"<!ENTITY"
# "20261127190000 +0100": the date and time (seconds, minutes or hours may be left off), then
# an optional offset from UTC (none: UTC, as the XMLTV DTD says).
_TIME = re.compile(
    r"\s*(\d{4})(\d{2})(\d{2})(?:(\d{2})(?:(\d{2})(\d{2})?)?)?"
    r"\s*(?:([+-])(\d{2}):?(\d{2})|(?:UTC|GMT|Z))?\s*",
    re.ASCII,
)


class XMLTVParseError(Exception):
    """The guide cannot be read; the message says why, for a person."""


@dataclass(frozen=True)
class GuideChannel:
    """A ``<channel>``: its guide ID, display names (in the guide's order) and icon URL."""

    id: str
    names: tuple[str, ...]
    icon: str = ""


@dataclass(frozen=True)
class GuideProgramme:
    channel: str
    start: datetime
    stop: datetime
    title: str
    subtitle: str = ""
    desc: str = ""


def xmltv_time_parse(text: str) -> datetime:
    """An aware datetime of an XMLTV time (``20261127190000 +0100``); ValueError if it is none."""
    match = _TIME.fullmatch(text)
    if match is None:
        raise ValueError(f"not an XMLTV time: {text[:40]!r}")
    year, month, day, hour, minute, second, sign, off_h, off_m = match.groups()
    offset = UTC
    if sign:
        delta = timedelta(hours=int(off_h), minutes=int(off_m))
        offset = timezone(-delta if sign == "-" else delta)
    return datetime(
        int(year),
        int(month),
        int(day),
        int(hour or 0),
        int(minute or 0),
        int(second or 0),
        tzinfo=offset,
    ).astimezone(UTC)


@dataclass
class _Open:
    """The channel or programme whose end tag has not come yet, as far as it is read."""

    attrs: dict[str, str]
    names: list[str] = field(default_factory=list)
    icon: str = ""
    texts: dict[str, str] = field(default_factory=dict)


# The text kept of a programme's or channel's child, and its bound.
_KEPT_TEXT = {
    "title": TITLE_MAX,
    "sub-title": TITLE_MAX,
    "desc": DESC_MAX,
    "display-name": NAME_MAX,
}


class _GuideTarget:
    """What expat calls for each tag and run of text: keeps the current record's wanted fields,
    bounded, and queues each finished record in ``done``. The first title, sub-title and
    description of a programme are kept (guides repeat them per language)."""

    def __init__(self) -> None:
        self.done: list[GuideChannel | GuideProgramme] = []
        self.root = ""  # the document element's tag, once it has come
        self._depth = 0
        self._record: _Open | None = None
        self._kind = ""
        self._text_tag: str | None = None
        self._text: list[str] = []
        self._text_size = 0

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        self._depth += 1
        if self._depth > MAX_DEPTH:
            raise XMLTVParseError(f"elements nest deeper than {MAX_DEPTH} levels")
        if self._depth == 1:
            self.root = tag
            if tag != "tv":
                raise XMLTVParseError(f"not an XMLTV guide: the document is <{tag[:40]}>, not <tv>")
        elif self._depth == 2 and tag in ("channel", "programme"):
            self._kind, self._record = tag, _Open(attrs={k: v[:ID_MAX] for k, v in attrs.items()})
        elif self._depth == 3 and self._record is not None:
            if tag in _KEPT_TEXT:
                self._text_tag, self._text, self._text_size = tag, [], 0
            elif tag == "icon" and not self._record.icon:
                self._record.icon = attrs.get("src", "")[:ICON_MAX]

    def data(self, text: str) -> None:
        if self._text_tag is None:
            return
        room = _KEPT_TEXT[self._text_tag] - self._text_size
        if room > 0:
            self._text.append(text[:room])
            self._text_size += min(len(text), room)

    def end(self, tag: str) -> None:
        self._depth -= 1
        if self._depth == 2 and self._text_tag is not None:
            text = " ".join("".join(self._text).split())
            if self._text_tag == "display-name":
                if text:
                    self._record.names.append(text)
            else:
                self._record.texts.setdefault(self._text_tag, text)
            self._text_tag = None
        elif self._depth == 1 and self._record is not None:
            record = self._channel() if self._kind == "channel" else self._programme()
            if record is not None:
                self.done.append(record)
            self._record = None

    def close(self) -> None:
        pass

    def _channel(self) -> GuideChannel | None:
        channel_id = self._record.attrs.get("id", "").strip()
        if not channel_id:
            return None
        return GuideChannel(channel_id, tuple(self._record.names), self._record.icon)

    def _programme(self) -> GuideProgramme | None:
        attrs, texts = self._record.attrs, self._record.texts
        channel, title = attrs.get("channel", "").strip(), texts.get("title", "")
        if not channel or not title or "start" not in attrs:
            return None
        try:
            start = xmltv_time_parse(attrs["start"])
            # No stop: the programme is taken to last until the next one of its channel starts,
            # which the caller knows and the parser does not; an hour meanwhile.
            stop = (
                xmltv_time_parse(attrs["stop"]) if "stop" in attrs else start + timedelta(hours=1)
            )
        except ValueError:
            return None
        if stop <= start:
            return None
        return GuideProgramme(
            channel, start, stop, title, texts.get("sub-title", ""), texts.get("desc", "")
        )


class _Bounded:
    """Reads ``stream`` and raises once more than ``limit`` bytes came out of it."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self._stream, self._limit, self.read_bytes = stream, limit, 0

    def read(self, size: int) -> bytes:
        chunk = self._stream.read(size)
        self.read_bytes += len(chunk)
        if self.read_bytes > self._limit:
            raise XMLTVParseError(f"the guide is larger than {self._limit} bytes of XML")
        return chunk


def xmltv_parse(source: BinaryIO, *, max_bytes: int) -> Iterator[GuideChannel | GuideProgramme]:
    """The guide's channels and programmes in file order, read from ``source`` (a seekable
    binary file, plain or gzip) a chunk at a time; raises :class:`XMLTVParseError` for what is
    not a guide, or a hostile one. Programmes that lack what the admin shows (a channel, a
    start, a title) or whose times do not read are left out."""
    try:
        source.seek(0)
        gzipped = source.read(2) == _GZIP_MAGIC
        source.seek(0)
        stream = gzip.GzipFile(fileobj=source, mode="rb") if gzipped else source
        yield from _records(_Bounded(stream, max_bytes))
    except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
        raise XMLTVParseError(f"the guide cannot be read: {error}") from None


def _records(stream: _Bounded) -> Iterator[GuideChannel | GuideProgramme]:
    target = _GuideTarget()
    # Safe to feed a stranger's bytes: entity declarations are refused before it sees them,
    # it fetches nothing external, and the target keeps no tree.
    parser = XMLParser(target=target)  # noqa: S314
    tail = b""  # the end of the chunk before, so that a declaration split between two is seen
    while chunk := stream.read(READ_CHUNK):
        if _ENTITY_DECLARATION in tail + chunk:
            raise XMLTVParseError("the guide declares XML entities, which a guide never needs")
        tail = chunk[-len(_ENTITY_DECLARATION) :]
        try:
            parser.feed(chunk)
        except ParseError as error:
            raise XMLTVParseError(f"the guide is not well-formed XML: {error}") from None
        yield from target.done
        target.done.clear()
    if stream.read_bytes == 0:
        raise XMLTVParseError("the guide is empty")
    try:
        parser.close()
    except ParseError as error:
        raise XMLTVParseError(f"the guide is not well-formed XML: {error}") from None
    if not target.root:
        raise XMLTVParseError("the guide holds no element")
    yield from target.done
    target.done.clear()
