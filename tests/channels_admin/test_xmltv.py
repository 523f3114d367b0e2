"""The XMLTV parser: times with offsets, gzip, bounds, and hostile or broken guides."""

from __future__ import annotations

import gzip
import io
import resource
import time
from datetime import UTC, datetime

import pytest

from channels_admin.xmltv import (
    DESC_MAX,
    MAX_DEPTH,
    TITLE_MAX,
    GuideChannel,
    GuideProgramme,
    XMLTVParseError,
    xmltv_parse,
    xmltv_time_parse,
)

GUIDE = b"""<?xml version="1.0" encoding="UTF-8"?>
<!DOCTYPE tv SYSTEM "xmltv.dtd">
<tv generator-info-name="test">
  <channel id="news.uk">
    <display-name lang="en">News One</display-name>
    <display-name>  N1 </display-name>
    <icon src="http://logo.example/n1.png"/>
  </channel>
  <programme start="20261127190000 +0100" stop="20261127203000 +0100" channel="news.uk">
    <title lang="en">Evening &amp; News</title>
    <title lang="fr">Le Soir</title>
    <sub-title>Part 2</sub-title>
    <desc>Long
      text</desc>
    <category>News</category>
  </programme>
  <programme start="20261127203000 +0100" channel="news.uk"><title>Sport</title></programme>
  <programme start="20261127210000" stop="20261127200000" channel="news.uk">
    <title>Backwards</title></programme>
  <programme start="yesterday" stop="20261127200000" channel="news.uk">
    <title>Bad time</title></programme>
  <programme start="20261127220000 -0530" stop="202611272300 -0530" channel="sport.in">
    <title>Cricket</title></programme>
</tv>
"""


def parsed(data: bytes, max_bytes: int = 10_000_000) -> list:
    return list(xmltv_parse(io.BytesIO(data), max_bytes=max_bytes))


def test_times_carry_their_offsets_and_are_given_in_utc():
    assert xmltv_time_parse("20261127190000 +0100") == datetime(2026, 11, 27, 18, 0, tzinfo=UTC)
    assert xmltv_time_parse("20261127190000 -0530") == datetime(2026, 11, 28, 0, 30, tzinfo=UTC)
    assert xmltv_time_parse("20261127190000") == datetime(2026, 11, 27, 19, 0, tzinfo=UTC)
    assert xmltv_time_parse("202611271905 +0000") == datetime(2026, 11, 27, 19, 5, tzinfo=UTC)
    assert xmltv_time_parse("20261127") == datetime(2026, 11, 27, tzinfo=UTC)
    with pytest.raises(ValueError, match="not an XMLTV time: 'tomorrow'"):
        xmltv_time_parse("tomorrow")


def test_a_guide_gives_its_channels_and_programmes_in_order():
    records = parsed(GUIDE)

    assert records == [
        GuideChannel("news.uk", ("News One", "N1"), "http://logo.example/n1.png"),
        GuideProgramme(
            "news.uk",
            datetime(2026, 11, 27, 18, 0, tzinfo=UTC),
            datetime(2026, 11, 27, 19, 30, tzinfo=UTC),
            "Evening & News",
            "Part 2",
            "Long text",
        ),
        # no stop: an hour
        GuideProgramme(
            "news.uk",
            datetime(2026, 11, 27, 19, 30, tzinfo=UTC),
            datetime(2026, 11, 27, 20, 30, tzinfo=UTC),
            "Sport",
        ),
        # a stop before the start and a time that does not read are left out
        GuideProgramme(
            "sport.in",
            datetime(2026, 11, 28, 3, 30, tzinfo=UTC),
            datetime(2026, 11, 28, 4, 30, tzinfo=UTC),
            "Cricket",
        ),
    ]


def test_a_gzip_guide_reads_as_the_plain_one():
    assert parsed(gzip.compress(GUIDE)) == parsed(GUIDE)


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"", "the guide is empty"),
        (
            b"<html><body>Not found</body></html>",
            "not an XMLTV guide: the document is <html>, not <tv>",
        ),
        (
            b"<tv><channel id='a'></tv>",
            "the guide is not well-formed XML: mismatched tag: line 1, column 22",
        ),
        (b"<tv>", "the guide is not well-formed XML: no element found: line 1, column 4"),
        (b"\x1f\x8b\x08\x00garbage", "the guide cannot be read: "),
        (
            b"<tv>&nbsp;</tv>",
            "the guide is not well-formed XML: undefined entity: line 1, column 4",
        ),
    ],
)
def test_what_is_not_a_guide_is_refused_with_the_reason(data, reason):
    with pytest.raises(XMLTVParseError) as raised:
        parsed(data)

    assert str(raised.value).startswith(reason)
    if reason.endswith(": "):
        assert len(str(raised.value)) > len(reason)


def test_a_billion_laughs_is_refused_before_it_expands():
    laughs = [b'<!ENTITY lol0 "lol">']
    laughs += [b'<!ENTITY lol%d "%s">' % (i, b"&lol%d;" % (i - 1) * 10) for i in range(1, 10)]
    bomb = b"<?xml version='1.0'?><!DOCTYPE tv [" + b"".join(laughs) + b"]><tv>&lol9;</tv>"
    started = time.monotonic()
    peak_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    with pytest.raises(XMLTVParseError, match=r"^the guide declares XML entities"):
        parsed(bomb)

    assert time.monotonic() - started < 1
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_before < 10_000  # KiB


def test_an_entity_declaration_split_between_two_reads_is_seen():
    padding = b" " * (1024 * 1024 - 4)
    bomb = b"<?xml version='1.0'?><!DOCTYPE tv [" + padding + b'<!ENTITY a "b">]><tv>&a;</tv>'

    with pytest.raises(XMLTVParseError, match=r"^the guide declares XML entities"):
        parsed(bomb)


def test_a_gzip_bomb_stops_at_the_bound_on_xml():
    # 50 MB of XML in 50 kB of gzip
    inflating = gzip.compress(b"<tv>" + b" " * 50_000_000 + b"</tv>")
    assert len(inflating) < 100_000

    with pytest.raises(XMLTVParseError, match=r"^the guide is larger than 5000000 bytes of XML$"):
        parsed(inflating, max_bytes=5_000_000)


def test_deep_nesting_is_refused():
    deep = b"<tv>" + b"<a>" * MAX_DEPTH + b"</a>" * MAX_DEPTH + b"</tv>"

    with pytest.raises(XMLTVParseError, match=f"^elements nest deeper than {MAX_DEPTH} levels$"):
        parsed(deep)


def test_long_texts_are_cut_to_their_bounds_as_they_come():
    title = "T" * 5_000_000
    desc = "D" * 5_000_000
    guide = (
        '<tv><programme start="20261127190000" channel="a">'
        f"<title>{title}</title><desc>{desc}</desc></programme></tv>"
    ).encode()

    [programme] = parsed(guide, max_bytes=20_000_000)

    assert (programme.title, programme.desc) == ("T" * TITLE_MAX, "D" * DESC_MAX)
