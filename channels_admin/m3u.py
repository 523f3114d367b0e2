"""Extended-M3U (IPTV playlist) parsing.

An IPTV playlist is a text file in the extended M3U format: an optional ``#EXTM3U`` header whose
attributes point at the programme guide (``url-tvg="https://.../epg.xml"``), then one entry per
channel. An entry is an ``#EXTINF`` line, carrying a duration (``-1`` for a live stream),
``key="value"`` attributes (``tvg-id``, ``tvg-name``, ``tvg-logo``, ``group-title`` ...) and,
after the first comma outside quotes, the display title; the stream URL follows on its own line.
Between the two, player hints may appear: ``#EXTGRP:<group>``, ``#EXTVLCOPT:<option>=<value>``
(VLC options, of which the HTTP user agent and referrer matter: some streams refuse requests
without them) and ``#EXTHTTP:{"header": "value", ...}`` (HTTP headers as a JSON object, e.g. a
cookie). A file of bare URL lines, without any of this, is a playlist too.

There is no formal grammar; files in the wild come from many tools and from hand editing. The
parser is lenient about what real files get wrong (encoding, line endings, quoting, missing titles
or durations, an ``#EXTINF`` with no URL, stray lines) and strict about data that is not a
playlist at all (empty, binary, an HTML error page, an HLS stream playlist): those raise
:class:`M3UParseError`, the only exception it raises, with a message meant for a person.

:func:`channel_ids` gives every entry an ID that is unique within the playlist and the same on
every reload of the same playlist, so that stored channels can be matched up again.
"""

from __future__ import annotations

import hashlib
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

__all__ = ["M3UEntry", "M3UParseError", "M3UPlaylist", "channel_ids", "m3u_parse"]

# Header attributes that name programme guides (XMLTV). `tvg-url` is not in the two common
# spellings but some providers write it, and a guide URL is never harmful to offer.
EPG_URL_ATTRS = ("url-tvg", "x-tvg-url", "tvg-url")

# How much of the start of the data is inspected to tell text from binary.
_SNIFF_CHARS = 8192

# C0 controls other than tab, LF, VT, FF, CR, plus DEL and the C1 block: text never has many;
# binary data decoded as Latin-1 is full of them.
_CONTROL_CHARS = re.compile(r"[\x00-\x08\x0e-\x1f\x7f-\x9f]")
_BINARY = "the file contains binary data, not a text playlist"
_LONE_CR = re.compile(r"\r(?!\n)")
_LEADING_SPACE = re.compile(r"\s*")
_HTML_MARKER = re.compile(r"<(?:html|!doctype)", re.IGNORECASE)
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S")

# A duration and the attributes may be glued together by careless writers ("-1tvg-id=...").
_DURATION_TOKEN = re.compile(r"\s*+([^\s,]*+)")
_GLUED_DURATION = re.compile(r"[-+]?\d+(?:\.\d+)?(?=[A-Za-z])")

# One token of an #EXTINF line after the duration, tried in this order: an attribute (value in
# double quotes, single quotes or bare), the comma that starts the title (which then runs to the
# end of the line, commas and quotes included), or a stray word. findall() walks the line token
# by token, so a quote only opens a value right after "=" and a comma inside a quoted value never
# ends the attributes. An unterminated quote degrades to a bare value. Possessive quantifiers keep
# a failed attempt from backtracking through long words.
_EXTINF_TOKEN = re.compile(
    r"""
    \s*+
    (?:
        ([^\s=,"']++) \s*+ = \s*+ (?: "([^"]*)" | '([^']*)' | ["']?([^\s,]*+) )
      | ,(.*)
      | [^\s,]++
    )
    """,
    re.VERBOSE | re.DOTALL,
)
# The usual shape of an #EXTINF line, matched in one step: a duration, then up to _SIMPLE_SLOTS
# lower-case keys with double-quoted values, each after a space, then the title. Every pair lands
# in groups of its own, so no Python code walks the line. Anything else (more pairs, other quoting
# or case) takes the token path above, with the same results.
_SIMPLE_SLOTS = 12
_EXTINF_SIMPLE = re.compile(
    r"[ \t]*+([^\s,=\"']*+)"
    + r'(?:[ \t]++([-a-z0-9_.:]++)="([^"]*+)")?+' * _SIMPLE_SLOTS
    + r"[ \t]*+(?:,(.*))?",
    re.DOTALL,
)
_SIMPLE_KEYS = slice(1, 2 * _SIMPLE_SLOTS, 2)
_SIMPLE_VALUES = slice(2, 2 * _SIMPLE_SLOTS + 1, 2)
# The header has no title, so there a comma is only a separator. Tokens again, not a search for
# pairs: a search would restart inside every stray word, quadratic on a long one.
_HEADER_TOKEN = re.compile(
    r"""
    \s*+
    (?:
        ([^\s=,"']++) \s*+ = \s*+ (?: "([^"]*)" | '([^']*)' | ["']?([^\s,]*+) )
      | [^\s,]++
      | ,
    )
    """,
    re.VERBOSE,
)


class M3UParseError(ValueError):
    """The data is not a usable M3U playlist; the message says why, for a person to read."""


@dataclass(frozen=True, slots=True)
class M3UEntry:
    """One channel: its stream URL and what the playlist says about it."""

    title: str
    url: str
    duration: float | None
    attrs: dict[str, str]
    group: str
    user_agent: str
    referrer: str
    headers: dict[str, str] = field(default_factory=dict)  # from #EXTHTTP

    @property
    def tvg_id(self) -> str:
        return self.attrs.get("tvg-id", "")

    @property
    def tvg_name(self) -> str:
        return self.attrs.get("tvg-name", "")

    @property
    def logo(self) -> str:
        return self.attrs.get("tvg-logo", "")

    @property
    def chno(self) -> str:
        return self.attrs.get("tvg-chno", "")


@dataclass(frozen=True, slots=True)
class M3UPlaylist:
    """A parsed playlist. ``ignored_lines`` counts lines that were neither a directive, a
    comment nor a ``scheme://`` URL (relative paths, stray text): they were skipped."""

    header_attrs: dict[str, str]
    entries: list[M3UEntry]
    ignored_lines: int = 0

    @property
    def epg_urls(self) -> list[str]:
        """Programme guide URLs named by the header, each once, in the order written."""
        urls: dict[str, None] = {}
        for key in EPG_URL_ATTRS:
            for part in self.header_attrs.get(key, "").split(","):
                url = part.strip()
                if url:
                    urls[url] = None
        return list(urls)


def m3u_parse(data: bytes | str) -> M3UPlaylist:
    """Parse an extended-M3U playlist given as raw bytes (as downloaded) or decoded text.

    Raises :class:`M3UParseError` when the data is not a playlist or holds no entry.
    """
    text = _decode(data)
    _reject_non_playlist(text)
    # Not str.splitlines(): it also splits at form feeds, U+0085 and U+2028, which can sit inside
    # a title. The CR of a CRLF goes with the strip() of each line, which saves copying the text;
    # only a lone CR (old Mac files, mixed endings) needs the copy.
    if _LONE_CR.search(text) is not None:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    lines = text.split("\n")

    header_attrs: dict[str, str] = {}
    entries: list[M3UEntry] = []
    ignored = 0
    # What has been said about the next entry since the previous URL line. Options and groups may
    # be written before the #EXTINF as well as after it, so they are kept apart from it.
    pending: tuple[str, float | None, dict[str, str]] | None = None
    group = user_agent = referrer = ""
    headers: dict[str, str] = {}

    for raw_line in lines:
        line = raw_line.strip()
        if not line:
            continue
        if line[0] == "#":
            head = line[:21].upper()
            if head.startswith("#EXTINF:"):
                # A previous #EXTINF still pending had no URL: it is replaced, i.e. dropped.
                pending = _parse_extinf(line, 8)
            elif head.startswith("#EXTVLCOPT:"):
                option, _, value = line[11:].partition("=")
                option = option.strip().lower()
                if option == "http-user-agent":
                    user_agent = value.strip()
                elif option in ("http-referrer", "http-referer"):
                    referrer = value.strip()
            elif head.startswith("#EXTHTTP:"):
                headers = _http_headers(line[9:])
            elif head.startswith("#EXTGRP:"):
                group = line[8:].strip()
            elif head.startswith("#EXTM3U") and (len(line) == 7 or line[7] in " \t:"):
                # Concatenated playlists repeat the header; the first value of a key wins.
                for key, value in _attributes(_HEADER_TOKEN.findall(line, 8)).items():
                    header_attrs.setdefault(key, value)
            elif head.startswith(("#EXT-X-TARGETDURATION", "#EXT-X-STREAM-INF")):
                # Mandatory tags of HLS media and master playlists: someone gave a stream's URL
                # where the channel list's belongs. Its segments are not channels.
                raise M3UParseError("the file is an HLS stream playlist, not a channel list")
            continue
        if _URL.match(line) is None:
            # A relative path or stray text. If an #EXTINF is pending this line was meant as its
            # location, so that #EXTINF (and its options) must not move on to the next URL.
            ignored += 1
            pending = None
            group = user_agent = referrer = ""
            headers = {}
            continue
        if pending is None:
            entries.append(M3UEntry(line, line, None, {}, group, user_agent, referrer, headers))
        else:
            title, duration, attrs = pending
            entries.append(
                M3UEntry(
                    title or attrs.get("tvg-name", "").strip() or line,
                    line,
                    duration,
                    attrs,
                    attrs.get("group-title", "").strip() or group,
                    user_agent,
                    referrer,
                    headers,
                )
            )
            pending = None
        group = user_agent = referrer = ""
        headers = {}

    if not entries:
        raise M3UParseError(_no_entries_message(ignored))
    return M3UPlaylist(header_attrs, entries, ignored)


def _http_headers(text: str) -> dict[str, str]:
    """An ``#EXTHTTP`` JSON object as headers; what is not a JSON object, or a name or value
    that could not go in an HTTP header, is left out."""
    try:
        value = json.loads(text)
    except ValueError:
        return {}
    if not isinstance(value, dict):
        return {}
    return {
        name.strip(): str(item).strip()
        for name, item in value.items()
        if _HEADER_NAME.fullmatch(name.strip())
        and isinstance(item, str | int | float)
        and not _HEADER_BREAK.search(str(item))
    }


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # RFC 9110's token
_HEADER_BREAK = re.compile(r"[\r\n\x00]")


def channel_ids(entries: Sequence[M3UEntry]) -> list[str]:
    """One ID per entry, in order, unique within ``entries`` and stable across reloads.

    An entry's ID is its ``tvg-id``. When a ``tvg-id`` repeats (one channel offered as several
    streams), the first occurrence keeps it and the later ones get ``<tvg-id>~<sha1(url)[:8]>``.
    An entry without ``tvg-id`` gets ``ch-<sha1(title + "\\n" + url)[:12]>``. Whatever still
    collides (the same entry written twice) gets ``~2``, ``~3`` ... in order of occurrence.
    """
    used: set[str] = set()
    ids: list[str] = []
    for entry in entries:
        tvg_id = entry.tvg_id.strip()
        if not tvg_id:
            candidate = "ch-" + _sha1_hex(f"{entry.title}\n{entry.url}")[:12]
        elif tvg_id in used:
            candidate = f"{tvg_id}~{_sha1_hex(entry.url)[:8]}"
        else:
            candidate = tvg_id
        if candidate in used:
            suffix = 2
            while f"{candidate}~{suffix}" in used:
                suffix += 1
            candidate = f"{candidate}~{suffix}"
        used.add(candidate)
        ids.append(candidate)
    return ids


def _decode(data: bytes | str) -> str:
    if isinstance(data, str):
        return data.removeprefix("\ufeff")
    if not isinstance(data, bytes | bytearray | memoryview):
        raise M3UParseError(f"expected the playlist as bytes or str, got {type(data).__name__}")
    raw = bytes(data)
    # Windows tools save "Unicode" text as UTF-16 with a byte-order mark; without one, UTF-16
    # is indistinguishable from binary and is reported as such below.
    if raw.startswith((b"\xff\xfe", b"\xfe\xff")) and not raw.startswith(b"\xff\xfe\x00\x00"):
        return raw.decode("utf-16", errors="replace").removeprefix("\ufeff")
    if b"\x00" in raw:
        raise M3UParseError(_BINARY)
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    # Playlists are sometimes Latin-1 / Windows-1252, and sometimes glued together from files in
    # different encodings: decoding line by line keeps the UTF-8 lines intact.
    return "\n".join(_decode_line(part) for part in raw.removeprefix(b"\xef\xbb\xbf").split(b"\n"))


def _decode_line(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        pass
    try:
        return raw.decode("cp1252")
    except UnicodeDecodeError:
        # cp1252 leaves five bytes undefined; Latin-1 maps every byte.
        return raw.decode("latin-1")


def _reject_non_playlist(text: str) -> None:
    start = _LEADING_SPACE.match(text).end()
    if start == len(text):
        raise M3UParseError("the playlist is empty")
    head = text[start : start + _SNIFF_CHARS]
    if "\x00" in text or len(_CONTROL_CHARS.findall(head)) * 10 > len(head):
        raise M3UParseError(_BINARY)
    if head[0] == "<":
        if head[:5].lower() == "<?xml" and _HTML_MARKER.search(head) is None:
            # Likely the programme guide (XMLTV) given where the playlist belongs.
            raise M3UParseError("the file is an XML document, not an M3U playlist")
        raise M3UParseError("the file is an HTML page, not an M3U playlist")
    # An error page may start with stray text (a server warning) before the markup; a real
    # playlist announces itself with its header and may well mention "<html" in a title.
    if head[:7].upper() != "#EXTM3U" and _HTML_MARKER.search(text) is not None:
        raise M3UParseError("the file is an HTML page, not an M3U playlist")


def _parse_extinf(line: str, start: int) -> tuple[str, float | None, dict[str, str]]:
    """Split an #EXTINF line after its colon (``start``) into (title, duration, attributes)."""
    simple = _EXTINF_SIMPLE.fullmatch(line, start)
    if simple is None:
        return _parse_extinf_tokens(line[start:])
    groups = simple.groups()
    attrs = dict(zip(groups[_SIMPLE_KEYS], groups[_SIMPLE_VALUES], strict=True))
    # The slots left unused are None, and all fall on that one key.
    attrs.pop(None, None)
    return (groups[-1] or "").strip(), _to_duration(groups[0]), attrs


def _parse_extinf_tokens(body: str) -> tuple[str, float | None, dict[str, str]]:
    token_match = _DURATION_TOKEN.match(body)
    token = token_match.group(1)
    pos = token_match.end()
    duration = _to_duration(token)
    if duration is None and "=" in token:
        # No separate duration: the first word is already an attribute.
        glued = _GLUED_DURATION.match(token)
        if glued is None:
            pos = token_match.start(1)
        else:
            duration = _to_duration(glued.group())
            pos = token_match.start(1) + glued.end()
    tokens = _EXTINF_TOKEN.findall(body, pos)
    # The title alternative consumes the rest of the line, so it can only be the last token.
    title = tokens[-1][4].strip() if tokens else ""
    return title, duration, _attributes(tokens)


def _attributes(tokens: list[tuple[str, ...]]) -> dict[str, str]:
    # Stray words and the title token have no key. Empty value groups come back as "", so the
    # first non-empty one is the value whichever quoting was used.
    return {token[0].lower(): token[1] or token[2] or token[3] for token in tokens if token[0]}


def _to_duration(token: str) -> float | None:
    try:
        value = float(token)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _no_entries_message(ignored: int) -> str:
    if ignored == 0:
        return "no channel entries found"
    if ignored == 1:
        return "no channel entries found (1 line is not a stream URL)"
    return f"no channel entries found ({ignored} lines are not stream URLs)"


def _sha1_hex(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", "surrogatepass"), usedforsecurity=False).hexdigest()
