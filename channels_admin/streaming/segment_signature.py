"""Short-lived signatures on the HLS output's segment URIs, checked by nginx and by the origin.

Only the playlist request carries a viewer link's token; the segment URIs it lists carry
``?l=<link>&e=<expiry>&s=<signature>`` instead. The signature is nginx's ``secure_link``
scheme, so that nginx checks it itself before it looks in its cache (docs/deploy.md)::

    s = base64url(MD5("<expiry><uri><link> <secret>")), without padding

``<uri>`` is the request's path (``/hls/seg-…ts``: nginx's ``$uri``), ``<expiry>`` Unix
seconds, ``<link>`` the viewer link's ID (0 while the stream is open: every playlist is signed,
as nginx checks every segment request). The origin computes the same and compares in constant
time, so a request that reaches it without nginx is checked alike. Checking is a hash and a
comparison, with no database.

- The string is unambiguous: the expiry is digits and the path starts with ``/``; the path
  (one of the origin's names) ends in ``.ts`` and the link is digits.
- This is MD5 over a string that ends with the secret, not an HMAC. What it needs is that no
  one without the secret can make a signature for a string the origin never signed: MD5's
  known breaks are collisions between two strings both chosen by the attacker, and here the
  origin chooses every string it signs (from its own names, a link and an expiry), with the
  secret last, which also rules out extending a signed string (length extension needs the
  secret first). A forger without the secret is left guessing 128 bits.
- The expiry is rounded up to a whole ``step`` of seconds: every playlist of a link handed out
  within one step signs a segment alike, so a cache keyed by the playlist's URL (the token)
  serves one text, and the signatures of one link do not multiply.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import re
from collections.abc import Mapping
from dataclasses import dataclass

# A segment line of a media playlist (hls_output.py's names), as the playlist lists it.
_SEGMENT_LINE = re.compile(rb"^(seg-[0-9a-f]+-[0-9]+\.ts)$", re.MULTILINE)
# Numbers as the origin writes them (no leading zero): nginx signs the text as sent.
_LINK, _EXPIRY = re.compile(r"0|[1-9][0-9]{0,17}"), re.compile(r"[1-9][0-9]{0,11}")
# Goes inside nginx's double quotes as it is: no quote, "$", "\" or space to escape.
SECRET = re.compile(r"[A-Za-z0-9_-]{32,128}")
# The link of a playlist while the stream is open (a viewer link's ID is 1 or more).
OPEN_LINK = 0


@dataclass(frozen=True)
class SegmentSigner:
    """Signs and checks the URIs of segments served under ``prefix`` with ``secret``; an
    expiry is rounded up to a whole ``step`` of seconds."""

    secret: str
    prefix: str = "/hls/"
    step: int = 2

    def __post_init__(self) -> None:
        if not SECRET.fullmatch(self.secret):
            raise ValueError("the segment secret must be 32 to 128 of A-Z a-z 0-9 _ -")

    def query(self, name: str, *, link: int, now: float, ttl: float) -> str:
        """The query string that lets the holder of ``link`` fetch segment ``name`` for
        ``ttl`` seconds (up to a ``step`` more)."""
        expires = math.ceil((now + ttl) / self.step) * self.step
        return f"l={link}&e={expires}&s={self.signature(name, link=link, expires=expires)}"

    def playlist(self, playlist: bytes, *, link: int, now: float, ttl: float) -> bytes:
        """``playlist`` with each segment URI signed for ``link``, for ``ttl`` seconds."""

        def signed(match: re.Match[bytes]) -> bytes:
            name = match[1].decode()
            return f"{name}?{self.query(name, link=link, now=now, ttl=ttl)}".encode()

        return _SEGMENT_LINE.sub(signed, playlist)

    def link_of(self, name: str, params: Mapping[str, str], *, now: float) -> int | None:
        """The link a signed request for segment ``name`` was made for; None when its
        signature is missing, malformed, wrong or expired."""
        link, expires, signature = params.get("l", ""), params.get("e", ""), params.get("s", "")
        # ASCII digits only: str.isdigit() takes "²", which int() refuses
        if not (_LINK.fullmatch(link) and _EXPIRY.fullmatch(expires)):
            return None
        if int(expires) < now:  # as nginx: expired once the second has passed
            return None
        expected = self.signature(name, link=int(link), expires=int(expires))
        if not hmac.compare_digest(expected.encode(), signature.encode()):
            return None
        return int(link)

    def signature(self, name: str, *, link: int, expires: int) -> str:
        """nginx's ``secure_link_md5 "$secure_link_expires$uri$arg_l <secret>"``, base64url
        without padding."""
        signed = f"{expires}{self.prefix}{name}{link} {self.secret}".encode()
        digest = hashlib.md5(signed).digest()  # noqa: S324 (nginx's secure_link: see above)
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
