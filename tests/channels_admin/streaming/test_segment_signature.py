"""The segment signature is nginx's secure_link scheme: each expected value is computed here
independently, as ``secure_link_md5 "$secure_link_expires$uri$arg_l <secret>"`` does."""

from __future__ import annotations

import base64
import hashlib

import pytest

from channels_admin.streaming.segment_signature import SegmentSigner

SECRET = "s3cret-0123456789abcdefghijklmnopqrstuv"
NAME = "seg-0a1b2c3d-42.ts"
NOW = 1_700_000_000.0


def nginx_md5(text: str) -> str:
    digest = hashlib.md5(text.encode()).digest()  # noqa: S324 (nginx's secure_link)
    return base64.urlsafe_b64encode(digest).decode().rstrip("=")


def test_the_signature_is_md5_of_expiry_uri_link_and_secret_in_base64url():
    signer = SegmentSigner(secret=SECRET)

    signature = signer.signature(NAME, link=7, expires=1_700_000_014)

    assert signature == nginx_md5(f"1700000014/hls/{NAME}7 {SECRET}")
    assert (
        signature == "3w5szlR4hOgEKIyFtmVsPA"
    )  # as `openssl md5 -binary | openssl base64 | tr +/ -_ | tr -d =` gives it


def test_a_query_carries_link_rounded_expiry_and_signature():
    signer = SegmentSigner(secret=SECRET)

    query = signer.query(NAME, link=7, now=NOW + 0.5, ttl=12)

    # 1,700,000,012.5 rounded up to a whole 2 s step
    assert query == f"l=7&e=1700000014&s={nginx_md5(f'1700000014/hls/{NAME}7 {SECRET}')}"
    # every playlist within that step signs alike
    assert signer.query(NAME, link=7, now=NOW + 1.9, ttl=12) == query


def test_a_playlist_has_each_segment_signed_and_nothing_else_changed():
    signer = SegmentSigner(secret=SECRET)
    playlist = b"#EXTM3U\n#EXTINF:2.000,\nseg-0a1b2c3d-41.ts\n#EXTINF:2.000,\nseg-0a1b2c3d-42.ts\n"

    signed = signer.playlist(playlist, link=0, now=NOW, ttl=12)

    e = 1_700_000_012
    assert signed.decode() == (
        "#EXTM3U\n#EXTINF:2.000,\n"
        f"seg-0a1b2c3d-41.ts?l=0&e={e}&s={nginx_md5(f'{e}/hls/seg-0a1b2c3d-41.ts0 {SECRET}')}\n"
        "#EXTINF:2.000,\n"
        f"seg-0a1b2c3d-42.ts?l=0&e={e}&s={nginx_md5(f'{e}/hls/seg-0a1b2c3d-42.ts0 {SECRET}')}\n"
    )


def test_the_origin_takes_a_good_signature_until_its_expiry_second_has_passed():
    signer = SegmentSigner(secret=SECRET)
    params = dict(
        pair.split("=") for pair in signer.query(NAME, link=7, now=NOW, ttl=12).split("&")
    )

    assert signer.link_of(NAME, params, now=NOW) == 7
    assert signer.link_of(NAME, params, now=NOW + 12.0) == 7  # as nginx: the second itself
    assert signer.link_of(NAME, params, now=NOW + 12.001) is None


@pytest.mark.parametrize(
    "change",
    [
        {"s": ""},
        {"s": "3w5szlR4hOgEKIyFtmVsPB"},  # one character off
        {"l": "8"},  # another link
        {"l": "07"},  # the same number, another string: nginx signs the string
        {"l": "²"},  # a digit to str.isdigit(), not to int()
        {"e": "1700000016"},  # a later expiry
        {"e": ""},
        {"e": "01700000014"},  # the same expiry, another string
        {"l": ""},
    ],
)
def test_the_origin_refuses_a_signature_changed_in_any_part(change):
    signer = SegmentSigner(secret=SECRET)
    params = {"l": "7", "e": "1700000014", "s": "3w5szlR4hOgEKIyFtmVsPA"}
    assert signer.link_of(NAME, params, now=NOW) == 7

    assert signer.link_of(NAME, {**params, **change}, now=NOW) is None


def test_another_segment_or_secret_does_not_take_the_signature():
    params = {"l": "7", "e": "1700000014", "s": "3w5szlR4hOgEKIyFtmVsPA"}

    assert SegmentSigner(secret=SECRET).link_of("seg-0a1b2c3d-43.ts", params, now=NOW) is None
    assert SegmentSigner(secret=SECRET + "x").link_of(NAME, params, now=NOW) is None


@pytest.mark.parametrize("secret", ["short", "x" * 129, 'a"b' * 20, "a b" * 20, "$x" * 20])
def test_a_secret_nginx_would_need_quoted_is_refused(secret):
    with pytest.raises(ValueError, match="the segment secret must be 32 to 128 of"):
        SegmentSigner(secret=secret)
