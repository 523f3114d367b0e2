"""Properties of the M3U parser over generated input (hypothesis): it raises nothing but its own
parse error, and it never loses or alters a well-formed entry, whatever surrounds it."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from channels_admin.m3u import M3UParseError, M3UPlaylist, m3u_parse

# Titles: any letters, digits, punctuation and spaces (quotes and commas included), no controls.
TITLE = st.text(
    st.characters(categories=["L", "M", "N", "P", "S", "Zs"]), min_size=1, max_size=40
).filter(lambda text: text.strip())
# Attribute values: no double quote (it would end the value) and no line break.
VALUE = st.text(
    st.characters(categories=["L", "N", "Zs"], include_characters="-_.:/&?=,'"), max_size=30
)
HOST = st.from_regex(r"[a-z0-9]{1,12}(\.[a-z0-9]{1,12}){0,2}", fullmatch=True)
PATH = st.from_regex(r"[A-Za-z0-9_.~/-]{0,30}", fullmatch=True)
URL = st.builds(lambda scheme, host, path: f"{scheme}://{host}/{path}",
                st.sampled_from(["http", "https"]), HOST, PATH)  # fmt: skip
NOISE = st.sampled_from(["", "# a comment", "#EXTVLCOPT:network-caching=1000", "  ", "#"])


@st.composite
def entries(draw: st.DrawFn) -> dict[str, str]:
    return {
        "title": draw(TITLE),
        "url": draw(URL),
        "tvg-id": draw(VALUE),
        "group": draw(VALUE).strip(),
        "duration": draw(st.sampled_from(["-1", "0", "3600", "-1.5"])),
    }


def written(entry: dict[str, str]) -> list[str]:
    return [
        f'#EXTINF:{entry["duration"]} tvg-id="{entry["tvg-id"]}" group-title="{entry["group"]}",'
        f"{entry['title']}",
        entry["url"],
    ]


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.binary(max_size=2000), st.text(max_size=2000)))
def test_anything_parses_or_raises_the_parse_error(data: bytes | str) -> None:
    try:
        playlist = m3u_parse(data)
    except M3UParseError:
        return  # the one exception it may raise
    assert isinstance(playlist, M3UPlaylist)
    assert playlist.entries


@settings(max_examples=200, deadline=None)
@given(
    st.lists(entries(), min_size=1, max_size=12),
    st.lists(NOISE, max_size=12),
    st.sampled_from(["\n", "\r\n", "\r"]),
    st.booleans(),
    st.sampled_from(["utf-8", "utf-8-sig"]),
)
def test_well_formed_entries_come_out_as_written(
    channels: list[dict[str, str]], noise: list[str], newline: str, header: bool, encoding: str
) -> None:
    lines = ["#EXTM3U"] if header else []
    for n, entry in enumerate(channels):
        lines.append(noise[n % len(noise)] if noise else "")
        lines += written(entry)
    data = newline.join(lines).encode(encoding)

    playlist = m3u_parse(data)

    found = [
        {
            "title": e.title,
            "url": e.url,
            "tvg-id": e.attrs["tvg-id"],
            "group": e.group,
            "duration": e.duration,
        }
        for e in playlist.entries
    ]
    assert found == [
        {**entry, "title": entry["title"].strip(), "duration": float(entry["duration"])}
        for entry in channels
    ]
