"""The extended-M3U parser: each parsing rule on a small inline playlist, the errors for data
that is not a playlist, channel IDs, and the real iptv-org playlist for Germany."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from channels_admin.m3u import M3UEntry, M3UParseError, M3UPlaylist, channel_ids, m3u_parse

# Shared test data lives beside the repository, not in it; tests that need it skip without it.
SAMPLE = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "m3u" / "iptv-org_de.m3u"

UA = (
    "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko)"
    " Chrome/149.0.0.0 Safari/537.3"
)


def entry(
    url: str,
    title: str | None = None,
    *,
    duration: float | None = -1.0,
    attrs: dict[str, str] | None = None,
    group: str = "",
    user_agent: str = "",
    referrer: str = "",
    headers: dict[str, str] | None = None,
) -> M3UEntry:
    return M3UEntry(
        title=url if title is None else title,
        url=url,
        duration=duration,
        attrs={} if attrs is None else attrs,
        group=group,
        user_agent=user_agent,
        referrer=referrer,
        headers={} if headers is None else headers,
    )


def only_entry(text: str) -> M3UEntry:
    playlist = m3u_parse(text)
    assert len(playlist.entries) == 1
    return playlist.entries[0]


# --- entries and header ------------------------------------------------------------------------


def test_extended_playlist_gives_every_field():
    data = (
        b'#EXTM3U url-tvg="https://epg.example/de.xml"\n'
        b'#EXTINF:-1 tvg-id="News.de" tvg-name="News" tvg-logo="https://logo.example/news.png"'
        b' group-title="Info" tvg-chno="7",News HD\n'
        b"https://stream.example/news.m3u8\n"
    )

    playlist = m3u_parse(data)

    assert playlist == M3UPlaylist(
        header_attrs={"url-tvg": "https://epg.example/de.xml"},
        entries=[
            entry(
                "https://stream.example/news.m3u8",
                "News HD",
                attrs={
                    "tvg-id": "News.de",
                    "tvg-name": "News",
                    "tvg-logo": "https://logo.example/news.png",
                    "group-title": "Info",
                    "tvg-chno": "7",
                },
                group="Info",
            )
        ],
        ignored_lines=0,
    )
    assert playlist.epg_urls == ["https://epg.example/de.xml"]


def test_entry_properties_read_the_tvg_attributes():
    news = only_entry(
        '#EXTINF:-1 tvg-id="News.de" tvg-name="News" tvg-logo="https://logo.example/n.png"'
        ' tvg-chno="7",News\nhttp://s.example/n\n'
    )
    bare = only_entry("#EXTINF:-1,Bare\nhttp://s.example/b\n")

    assert (news.tvg_id, news.tvg_name, news.logo, news.chno) == (
        "News.de",
        "News",
        "https://logo.example/n.png",
        "7",
    )
    assert (bare.tvg_id, bare.tvg_name, bare.logo, bare.chno) == ("", "", "", "")


def test_header_attributes_are_lower_cased_and_give_the_epg_urls():
    playlist = m3u_parse(
        '#EXTM3U URL-TVG="https://epg.example/1.xml,https://epg.example/2.xml"'
        " x-tvg-url='https://epg.example/2.xml, https://epg.example/3.xml' refresh=3600\n"
        "http://s.example/a\n"
    )

    assert playlist.header_attrs == {
        "url-tvg": "https://epg.example/1.xml,https://epg.example/2.xml",
        "x-tvg-url": "https://epg.example/2.xml, https://epg.example/3.xml",
        "refresh": "3600",
    }
    assert playlist.epg_urls == [
        "https://epg.example/1.xml",
        "https://epg.example/2.xml",
        "https://epg.example/3.xml",
    ]


def test_tvg_url_header_spelling_is_an_epg_url_too():
    playlist = m3u_parse('#EXTM3U tvg-url="https://epg.example/t.xml"\nhttp://s.example/a\n')

    assert playlist.epg_urls == ["https://epg.example/t.xml"]


def test_repeated_header_keeps_the_first_value_of_each_key():
    playlist = m3u_parse(
        '#EXTM3U url-tvg="https://epg.example/1.xml"\nhttp://s.example/a\n'
        '#EXTM3U url-tvg="https://epg.example/2.xml" catchup="shift"\nhttp://s.example/b\n'
    )

    assert playlist.header_attrs == {"url-tvg": "https://epg.example/1.xml", "catchup": "shift"}
    assert len(playlist.entries) == 2


def test_header_without_attributes_gives_none():
    playlist = m3u_parse("#EXTM3U\nhttp://s.example/a\n")

    assert playlist.header_attrs == {}
    assert playlist.epg_urls == []


def test_plain_url_lines_without_header_are_a_playlist():
    playlist = m3u_parse(
        "http://s.example/a.ts\nrtmp://live.example/app/b\nudp://@239.0.0.1:1234\n"
    )

    assert playlist == M3UPlaylist(
        header_attrs={},
        entries=[
            entry("http://s.example/a.ts", duration=None),
            entry("rtmp://live.example/app/b", duration=None),
            entry("udp://@239.0.0.1:1234", duration=None),
        ],
        ignored_lines=0,
    )


# --- bytes, encodings, line endings ------------------------------------------------------------


def test_utf8_bom_is_skipped_in_bytes_and_in_text():
    text = '#EXTM3U url-tvg="https://epg.example/e.xml"\n#EXTINF:-1,Köln\nhttp://s.example/k\n'

    from_bytes = m3u_parse(b"\xef\xbb\xbf" + text.encode())
    from_text = m3u_parse("\ufeff" + text)

    assert from_bytes.header_attrs == {"url-tvg": "https://epg.example/e.xml"}
    assert from_bytes.entries == [entry("http://s.example/k", "Köln")]
    assert from_text == from_bytes


@pytest.mark.parametrize("newline", ["\r\n", "\n", "\r"], ids=["crlf", "lf", "cr"])
def test_every_line_ending_gives_the_same_entries(newline):
    text = newline.join(
        ["#EXTM3U", '#EXTINF:-1 tvg-id="a",A', "http://s.example/a", "#EXTINF:5,B", "http://b/"]
    )

    playlist = m3u_parse(text.encode())

    assert playlist.entries == [
        entry("http://s.example/a", "A", attrs={"tvg-id": "a"}),
        entry("http://b/", "B", duration=5.0),
    ]


def test_mixed_line_endings_in_one_file():
    playlist = m3u_parse(b"#EXTM3U\r\n#EXTINF:-1,A\rhttp://a/\n#EXTINF:-1,B\r\nhttp://b/\r")

    assert playlist.entries == [entry("http://a/", "A"), entry("http://b/", "B")]


def test_blank_lines_and_surrounding_whitespace_are_ignored():
    text = (
        "\n\n   #EXTM3U   \n\n"
        '\t#EXTINF:-1 tvg-id="a" ,  Spaced Title  \t\n'
        "\n   \n"
        "   http://s.example/a   \n\n"
    )

    playlist = m3u_parse(text)

    assert playlist.entries == [entry("http://s.example/a", "Spaced Title", attrs={"tvg-id": "a"})]
    assert playlist.ignored_lines == 0


def test_latin1_bytes_fall_back_from_utf8():
    data = b'#EXTM3U\n#EXTINF:-1 group-title="Regional",M\xfcnchen TV\nhttp://s.example/m\n'

    assert m3u_parse(data).entries == [
        entry(
            "http://s.example/m", "München TV", attrs={"group-title": "Regional"}, group="Regional"
        )
    ]


def test_windows_1252_characters_are_decoded():
    # 0x80 is the euro sign and 0x96 an en dash in Windows-1252 (control characters in Latin-1).
    data = b"#EXTINF:-1,Shop \x80 24 \x96 Live\nhttp://s.example/shop\n"

    assert m3u_parse(data).entries == [entry("http://s.example/shop", "Shop € 24 \u2013 Live")]


def test_bytes_undefined_in_windows_1252_decode_as_latin1():
    data = b"#EXTINF:-1,Caf\xe9 \x81\nhttp://s.example/c\n"

    assert m3u_parse(data).entries == [entry("http://s.example/c", "Café \x81")]


def test_utf8_and_latin1_lines_in_one_file_are_each_decoded():
    data = "#EXTINF:-1,Köln\nhttp://s.example/k\n".encode() + b"#EXTINF:-1,M\xfcnchen\nhttp://m/\n"

    assert [e.title for e in m3u_parse(data).entries] == ["Köln", "München"]


def test_utf16_with_byte_order_mark_is_decoded():
    data = "#EXTM3U\r\n#EXTINF:-1,Zürich\r\nhttp://s.example/z\r\n".encode("utf-16")

    assert m3u_parse(data).entries == [entry("http://s.example/z", "Zürich")]


def test_bytearray_and_memoryview_are_accepted():
    data = b"#EXTINF:-1,A\nhttp://a/\n"

    assert m3u_parse(bytearray(data)) == m3u_parse(data)
    assert m3u_parse(memoryview(data)) == m3u_parse(data)


# --- the #EXTINF line --------------------------------------------------------------------------


def test_attribute_syntax_variants_and_commas_in_values_and_title():
    line = (
        '#EXTINF:-1 TVG-ID="a.de" Tvg-Name=\'Sender A\' group-title="News, Sports" tvg-chno=5'
        ' radio=true,A, the channel, "live"'
    )

    assert only_entry(line + "\nhttp://s.example/a\n") == entry(
        "http://s.example/a",
        'A, the channel, "live"',
        attrs={
            "tvg-id": "a.de",
            "tvg-name": "Sender A",
            "group-title": "News, Sports",
            "tvg-chno": "5",
            "radio": "true",
        },
        group="News, Sports",
    )


def test_comma_in_a_double_quoted_value_of_a_plain_line():
    line = '#EXTINF:-1 tvg-id="b" group-title="News, Sports",B, Extra'

    assert only_entry(line + "\nhttp://s.example/b\n") == entry(
        "http://s.example/b",
        "B, Extra",
        attrs={"tvg-id": "b", "group-title": "News, Sports"},
        group="News, Sports",
    )


def test_quotes_of_the_other_kind_inside_a_value():
    line = "#EXTINF:-1 tvg-name=\"Rock 'n' Roll\" tvg-logo='say \"hi\"',R"

    assert only_entry(line + "\nhttp://s.example/r\n").attrs == {
        "tvg-name": "Rock 'n' Roll",
        "tvg-logo": 'say "hi"',
    }


def test_attribute_values_are_kept_as_written():
    line = '#EXTINF:-1 tvg-name=" Spaced " tvg-id="",T'

    assert only_entry(line + "\nhttp://s.example/t\n").attrs == {
        "tvg-name": " Spaced ",
        "tvg-id": "",
    }


def test_spaces_around_the_equals_sign():
    line = '#EXTINF:-1 tvg-id = "x"  tvg-name= "Y",T'

    assert only_entry(line + "\nhttp://s.example/t\n").attrs == {"tvg-id": "x", "tvg-name": "Y"}


def test_stray_words_among_the_attributes_are_skipped():
    line = '#EXTINF:-1 junk tvg-id="x" "loose" more=,T'

    assert only_entry(line + "\nhttp://s.example/t\n") == entry(
        "http://s.example/t", "T", attrs={"tvg-id": "x", "more": ""}
    )


def test_unterminated_quote_ends_the_value_at_the_next_comma():
    line = '#EXTINF:-1 tvg-id="x" tvg-name="Broken,Title'

    assert only_entry(line + "\nhttp://s.example/t\n") == entry(
        "http://s.example/t", "Title", attrs={"tvg-id": "x", "tvg-name": "Broken"}
    )


def test_repeated_attribute_keeps_the_last_value():
    line = '#EXTINF:-1 tvg-id="first" TVG-ID="second",T'

    assert only_entry(line + "\nhttp://s.example/t\n").attrs == {"tvg-id": "second"}


def test_lower_case_directive_is_recognised():
    assert only_entry('#extinf:-1 tvg-id="x",T\nhttp://s.example/t\n') == entry(
        "http://s.example/t", "T", attrs={"tvg-id": "x"}
    )


@pytest.mark.parametrize(
    ("written", "duration"),
    [
        ("-1", -1.0),
        ("0", 0.0),
        ("10.5", 10.5),
        ("+3", 3.0),
        ("abc", None),
        ("", None),
        ("nan", None),
        ("inf", None),
        ("1.2.3", None),
    ],
)
def test_duration(written, duration):
    parsed = only_entry(f'#EXTINF:{written} tvg-id="x",T\nhttp://s.example/t\n')

    assert parsed.duration == duration
    assert parsed.attrs == {"tvg-id": "x"}
    assert parsed.title == "T"


def test_duration_left_out_before_the_attributes():
    assert only_entry('#EXTINF:tvg-id="x" tvg-name="N",T\nhttp://s.example/t\n') == entry(
        "http://s.example/t", "T", duration=None, attrs={"tvg-id": "x", "tvg-name": "N"}
    )


def test_duration_glued_to_the_first_attribute():
    assert only_entry('#EXTINF:-1tvg-id="x",T\nhttp://s.example/t\n') == entry(
        "http://s.example/t", "T", attrs={"tvg-id": "x"}
    )


def test_duration_without_attributes():
    assert only_entry("#EXTINF:10,Just a title\nhttp://s.example/t\n") == entry(
        "http://s.example/t", "Just a title", duration=10.0
    )


@pytest.mark.parametrize(
    ("extinf", "title"),
    [
        ('#EXTINF:-1 tvg-name="Name X",', "Name X"),
        ('#EXTINF:-1 tvg-name="Name X"', "Name X"),
        ('#EXTINF:-1 tvg-name="Name X",   ', "Name X"),
        ("#EXTINF:-1 TVG-NAME='Name X',", "Name X"),
        ('#EXTINF:-1 tvg-name="  Name X ",', "Name X"),
        ('#EXTINF:-1 tvg-id="x",', "http://s.example/t"),
        ('#EXTINF:-1 tvg-name="  ",', "http://s.example/t"),
        ("#EXTINF:-1", "http://s.example/t"),
        ("#EXTINF:", "http://s.example/t"),
    ],
)
def test_missing_title_falls_back_to_tvg_name_then_url(extinf, title):
    assert only_entry(f"{extinf}\nhttp://s.example/t\n").title == title


# --- #EXTGRP and #EXTVLCOPT --------------------------------------------------------------------


def test_extgrp_gives_the_group_when_there_is_no_group_title():
    playlist = m3u_parse(
        "#EXTINF:-1,A\n#EXTGRP:Sport\nhttp://a/\n"
        "#EXTGRP:Kids\n#EXTINF:-1,B\nhttp://b/\n"
        '#EXTINF:-1 group-title="News",C\n#EXTGRP:Ignored\nhttp://c/\n'
        '#EXTINF:-1 group-title=" ",D\n#EXTGRP:Film\nhttp://d/\n'
        "#EXTINF:-1,E\n#EXTGRP:First\n#EXTGRP:  Second  \nhttp://e/\n"
        "#EXTINF:-1,F\nhttp://f/\n"
    )

    assert [(e.title, e.group) for e in playlist.entries] == [
        ("A", "Sport"),
        ("B", "Kids"),
        ("C", "News"),
        ("D", "Film"),
        ("E", "Second"),
        ("F", ""),
    ]


def test_vlc_options_attach_to_the_next_entry_only():
    playlist = m3u_parse(
        "#EXTM3U\n"
        "#EXTINF:-1,After\n"
        "#EXTVLCOPT:http-user-agent=Agent/1.0 (X11)\n"
        "#EXTVLCOPT:http-referrer=https://ref.example/page\n"
        "http://s.example/after\n"
        "#EXTVLCOPT:http-user-agent=Agent/2.0\n"
        "#EXTVLCOPT:http-referer=https://ref.example/other\n"
        "#EXTINF:-1,Before\n"
        "http://s.example/before\n"
        "#EXTINF:-1,None\n"
        "http://s.example/none\n"
    )

    assert playlist.entries == [
        entry(
            "http://s.example/after",
            "After",
            user_agent="Agent/1.0 (X11)",
            referrer="https://ref.example/page",
        ),
        entry(
            "http://s.example/before",
            "Before",
            user_agent="Agent/2.0",
            referrer="https://ref.example/other",
        ),
        entry("http://s.example/none", "None"),
    ]


def test_vlc_options_apply_to_a_plain_url_line_and_other_options_are_ignored():
    playlist = m3u_parse(
        "#EXTVLCOPT:HTTP-User-Agent = Agent/3.0\n"
        "#EXTVLCOPT:network-caching=1000\n"
        "#EXTVLCOPT:http-origin=https://o.example\n"
        "http://s.example/plain\n"
    )

    assert playlist.entries == [
        entry("http://s.example/plain", duration=None, user_agent="Agent/3.0")
    ]


def test_exthttp_headers_apply_to_the_next_entry_and_unsafe_ones_are_left_out():
    playlist = m3u_parse(
        "#EXTM3U\n"
        '#EXTINF:-1 tvg-id="a",A\n'
        '#EXTHTTP:{"cookie": "session=abc; lang=de", "X-Token": 7, "bad name": "x",'
        ' "Injected": "a\\r\\nHost: evil", "nested": {"a": 1}}\n'
        "http://s.example/a\n"
        '#EXTINF:-1 tvg-id="b",B\n'
        "#EXTHTTP:not json\n"
        "http://s.example/b\n"
        '#EXTINF:-1 tvg-id="c",C\n'
        "http://s.example/c\n"
    )

    assert [e.headers for e in playlist.entries] == [
        {"cookie": "session=abc; lang=de", "X-Token": "7"},
        {},
        {},
    ]


# --- dropped and skipped lines -----------------------------------------------------------------


def test_extinf_without_url_is_dropped():
    playlist = m3u_parse(
        "#EXTM3U\n"
        '#EXTINF:-1 tvg-id="lost",Lost\n'
        "#EXTVLCOPT:http-user-agent=Agent/1.0\n"
        '#EXTINF:-1 tvg-id="kept",Kept\n'
        "http://s.example/kept\n"
        '#EXTINF:-1 tvg-id="last",Last without URL\n'
    )

    assert playlist.entries == [
        entry("http://s.example/kept", "Kept", attrs={"tvg-id": "kept"}, user_agent="Agent/1.0")
    ]
    assert playlist.ignored_lines == 0


def test_comment_lines_are_ignored():
    playlist = m3u_parse(
        "#EXTM3U\n"
        "# a comment, http://not.an.entry/\n"
        "#PLAYLIST:My TV\n"
        "#EXTGENRE:News\n"
        "#KODIPROP:inputstream.adaptive.manifest_type=hls\n"
        "#EXTINF:-1,A\n"
        "#EXTVLCOPTX:http-user-agent=no\n"
        "#http://commented.example/out\n"
        "http://s.example/a\n"
    )

    assert playlist.entries == [entry("http://s.example/a", "A")]
    assert playlist.ignored_lines == 0


def test_lines_that_are_not_urls_are_skipped_and_counted():
    playlist = m3u_parse(
        "#EXTM3U\nnot a url\nwww.example.com/stream.m3u8\nhttp://s.example/a\nC:\\streams\\b.ts\n"
    )

    assert playlist.entries == [entry("http://s.example/a", duration=None)]
    assert playlist.ignored_lines == 3


def test_skipped_line_takes_the_pending_extinf_with_it():
    # The relative path was the first entry's location: its title must not move on to the URL
    # of the plain entry after it.
    playlist = m3u_parse(
        "#EXTINF:-1,Relative\n#EXTVLCOPT:http-user-agent=Agent/1.0\nsegments/a.ts\nhttp://b/\n"
    )

    assert playlist.entries == [entry("http://b/", duration=None)]
    assert playlist.ignored_lines == 1


def test_html_mentioned_in_a_title_of_a_real_playlist_is_fine():
    playlist = m3u_parse("#EXTM3U\n#EXTINF:-1,Learn <html> TV\nhttp://s.example/h\n")

    assert playlist.entries == [entry("http://s.example/h", "Learn <html> TV")]


# --- not a playlist ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "the playlist is empty"),
        ("", "the playlist is empty"),
        (b" \r\n\n\t \r", "the playlist is empty"),
        (b"\xef\xbb\xbf", "the playlist is empty"),
        ("\ufeff\n\n", "the playlist is empty"),
        (
            b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00",
            "the file contains binary data, not a text playlist",
        ),
        (
            b"#EXTM3U\nhttp://s.example/a\n\x00",
            "the file contains binary data, not a text playlist",
        ),
        ("#EXTM3U\nhttp://s.example/a\x00\n", "the file contains binary data, not a text playlist"),
        (bytes(range(1, 32)) * 20, "the file contains binary data, not a text playlist"),
        (
            b"\x1f\x8b\x08\x08\xd2\x9e\xfcf\x02\xffde.m3u\xed\x9d\xcbn\xe3",
            "the file contains binary data, not a text playlist",
        ),
        (
            b"<html><head><title>404 Not Found</title></head></html>",
            "the file is an HTML page, not an M3U playlist",
        ),
        (
            b"\xef\xbb\xbf  \r\n<!DOCTYPE html>\n<html>\n",
            "the file is an HTML page, not an M3U playlist",
        ),
        ("<p>http://s.example/a</p>", "the file is an HTML page, not an M3U playlist"),
        (
            b"Warning: include(): failed\nhttp://s.example/a\n<HTML><body>x</body></HTML>\n",
            "the file is an HTML page, not an M3U playlist",
        ),
        (
            b"PHP Notice\n<!doctype html><p>gone</p>",
            "the file is an HTML page, not an M3U playlist",
        ),
        (
            b'<?xml version="1.0" encoding="UTF-8"?>\n<tv><channel id="a"/></tv>\n',
            "the file is an XML document, not an M3U playlist",
        ),
        (
            b'<?xml version="1.0"?>\n<!DOCTYPE html>\n<html xmlns="http://www.w3.org/1999/xhtml">',
            "the file is an HTML page, not an M3U playlist",
        ),
        (b"#EXTM3U\n", "no channel entries found"),
        (b"#EXTM3U\n#EXTINF:-1,A\n#EXTINF:-1,B\n", "no channel entries found"),
        (b"#EXTINF:-1,A\nsegment0.ts\n", "no channel entries found (1 line is not a stream URL)"),
        (b"hello\nworld\n", "no channel entries found (2 lines are not stream URLs)"),
        (
            b"#EXTM3U\n#EXT-X-VERSION:3\n#EXT-X-TARGETDURATION:10\n#EXTINF:10.0,\n"
            b"https://cdn.example/seg0.ts\n",
            "the file is an HLS stream playlist, not a channel list",
        ),
        (
            b"#EXTM3U\n#EXT-X-STREAM-INF:BANDWIDTH=1280000,RESOLUTION=1280x720\n"
            b"https://cdn.example/720p.m3u8\n",
            "the file is an HLS stream playlist, not a channel list",
        ),
        (None, "expected the playlist as bytes or str, got NoneType"),
    ],
)
def test_not_a_playlist(data, message):
    with pytest.raises(M3UParseError) as error:
        m3u_parse(data)

    assert str(error.value) == message


def test_parse_error_is_a_value_error():
    assert issubclass(M3UParseError, ValueError)


def test_mangled_input_raises_only_the_parse_error():
    # Whatever the bytes, a caller needs to handle one exception only.
    base = (
        b'#EXTM3U url-tvg="https://epg.example/e.xml"\r\n'
        b'#EXTINF:-1 tvg-id="a" tvg-name=\'A\' group-title="News, Sports",A, B\r\n'
        b"#EXTVLCOPT:http-user-agent=Agent\r\n#EXTGRP:G\r\nhttp://s.example/a\r\n"
        b"#EXTINF:5 x=y,\r\nhttp://s.example/b\r\n"
    )
    alphabet = b"#:,=\"' \t\r\n<>\x00\x81\xc3\xa4\xef\xbb\xbfEXTINFabc-1.5/"
    rng = random.Random(20260622)
    outcomes = {"parsed": 0, "rejected": 0}

    for _ in range(500):
        data = bytearray(base)
        for _ in range(rng.randint(1, 12)):
            position = rng.randrange(len(data) + 1)
            action = rng.randrange(3)
            if action == 0:
                data[position:position] = bytes([rng.choice(alphabet)])
            elif action == 1:
                del data[position : position + rng.randint(1, 8)]
            else:
                data[position : position + 1] = bytes([rng.randrange(256)])
        try:
            playlist = m3u_parse(bytes(data))
        except M3UParseError:
            outcomes["rejected"] += 1
        else:
            assert len(set(channel_ids(playlist.entries))) == len(playlist.entries)
            outcomes["parsed"] += 1

    # Both paths were exercised, so the loop tested something.
    assert outcomes["parsed"] > 100
    assert outcomes["rejected"] > 10


# --- channel IDs -------------------------------------------------------------------------------


def test_channel_ids_are_the_tvg_ids_when_unique():
    entries = [
        entry("http://a/", attrs={"tvg-id": "A.de"}),
        entry("http://b/", attrs={"tvg-id": "B.de@HD"}),
    ]

    assert channel_ids(entries) == ["A.de", "B.de@HD"]


def test_repeated_tvg_id_gets_the_url_hash_after_the_first():
    entries = [
        entry("http://cdn.example/a.m3u8", attrs={"tvg-id": "A.de"}),
        entry("http://cdn.example/a-backup.m3u8", attrs={"tvg-id": "A.de"}),
        entry("http://other.example/", attrs={"tvg-id": "B.de"}),
    ]

    assert channel_ids(entries) == ["A.de", "A.de~8fff064d", "B.de"]


def test_repeated_tvg_id_and_url_count_up():
    same = entry("http://cdn.example/a.m3u8", attrs={"tvg-id": "A.de"})

    assert channel_ids([same, same, same, same]) == [
        "A.de",
        "A.de~3320f839",
        "A.de~3320f839~2",
        "A.de~3320f839~3",
    ]


def test_entries_without_tvg_id_get_a_hash_of_title_and_url():
    entries = [
        entry("http://radio.example/x.mp3", "Radio X"),
        entry("http://radio.example/x.mp3", "Radio X", attrs={"tvg-id": "  "}),
        entry("http://radio.example/y.mp3", duration=None),
        entry("http://radio.example/x.mp3", "Radio X", attrs={"tvg-id": ""}),
    ]

    assert channel_ids(entries) == [
        "ch-8602523d3783",
        "ch-8602523d3783~2",
        "ch-1dba54407d72",
        "ch-8602523d3783~3",
    ]


def test_channel_ids_are_stable_across_reloads():
    text = (
        '#EXTINF:-1 tvg-id="A",A\nhttp://a/1\n#EXTINF:-1 tvg-id="A",A2\nhttp://a/2\n'
        "#EXTINF:-1,Nameless\nhttp://n/\n"
    )

    first = channel_ids(m3u_parse(text).entries)
    second = channel_ids(m3u_parse(text.encode()).entries)

    assert first == second
    assert len(set(first)) == 3


def test_channel_ids_of_no_entries():
    assert channel_ids([]) == []


# --- the real iptv-org playlist ----------------------------------------------------------------


@pytest.fixture(scope="module")
def sample() -> bytes:
    if not SAMPLE.is_file():
        pytest.skip(f"shared test data not present: {SAMPLE}")
    return SAMPLE.read_bytes()


def by_tvg_id(playlist: M3UPlaylist, tvg_id: str) -> M3UEntry:
    (found,) = [e for e in playlist.entries if e.tvg_id == tvg_id]
    return found


def test_iptv_org_germany_entries(sample):
    playlist = m3u_parse(sample)

    assert len(playlist.entries) == 238
    assert playlist.header_attrs == {}
    assert playlist.ignored_lines == 0
    assert playlist.entries[0] == entry(
        "https://123tv-mx1.flex-cdn.net/index.m3u8",
        "1-2-3 TV (270p)",
        attrs={"tvg-id": "123tv.de@SD"},
    )
    assert playlist.entries[-1] == entry(
        "http://hls127.freeott.top:8080/OstWest/video.m3u8",
        "Ost West (576p)",
        attrs={"tvg-id": "OstWest.de@SD"},
        user_agent=UA,
    )
    assert by_tvg_id(playlist, "ProSieben.de@SD") == entry(
        "http://85.187.13.40:18000/ProSieben",
        "ProSieben (576p)",
        attrs={"tvg-id": "ProSieben.de@SD"},
        referrer="http://85.187.13.40:18000/",
    )
    assert by_tvg_id(playlist, "TVRUS.de@SD") == entry(
        "http://213.91.179.28:8000/play/a082",
        "TVRUS",
        attrs={"tvg-id": "TVRUS.de@SD"},
        user_agent=UA,
    )
    assert by_tvg_id(playlist, "AllgauTV.de@SD").title == "Allgäu TV (1080p)"
    assert by_tvg_id(playlist, "").title == "FrankenPlus (1080p)"


def test_iptv_org_germany_summary(sample):
    entries = m3u_parse(sample).entries

    assert sum(1 for e in entries if e.user_agent) == 3
    assert sum(1 for e in entries if e.referrer) == 2
    assert sum(1 for e in entries if not e.title.isascii()) == 15
    assert {e.duration for e in entries} == {-1.0}
    assert {e.group for e in entries} == {""}
    assert sum(1 for e in entries if e.url.startswith("https://")) == 203
    assert sum(1 for e in entries if e.url.startswith("http://")) == 35


def test_iptv_org_germany_channel_ids(sample):
    playlist = m3u_parse(sample)

    ids = channel_ids(playlist.entries)

    assert len(ids) == 238
    assert len(set(ids)) == 238
    assert ids[2:4] == ["AdventureEarth.de@SD", "AdventureEarth.de@SD~04faace6"]
    assert ids[playlist.entries.index(by_tvg_id(playlist, ""))] == "ch-2d6bee038a8f"
    assert ids == channel_ids(m3u_parse(sample.decode("utf-8")).entries)
