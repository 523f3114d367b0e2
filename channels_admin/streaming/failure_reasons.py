"""Why a source failed, in words a person reads on the admin page and in the status.

aiohttp's own sentences are written for programmers ("Response payload is not completed:
<TransferEncodingError: 400, message='Not enough data to satisfy transfer length header.'>",
issue 48), and some hold the stream's URL, which often carries credentials. So each kind of
failure gets a sentence of its own here, and the technical detail (:func:`failure_detail`) goes
to the server's log only.
"""

from __future__ import annotations

import os
import socket

import aiohttp

from channels_admin.streaming.upstream_addresses import UpstreamDenied

UNEXPECTED = "an unexpected error (the server's log has its details)"
CONNECTION_FAILED = "the connection to the upstream failed"
# The first kind an error is an instance of gives its sentence: the narrower kinds first.
SENTENCES: tuple[tuple[type[BaseException], str], ...] = (
    (aiohttp.ClientConnectorCertificateError, "the upstream's TLS certificate is not trusted"),
    (aiohttp.ClientSSLError, "no secure (TLS) connection to the upstream could be made"),
    (aiohttp.ServerFingerprintMismatch, "the upstream's TLS certificate is not the one expected"),
    (aiohttp.ServerDisconnectedError, "the upstream closed the connection without an answer"),
    (aiohttp.ClientConnectionResetError, "the upstream reset the connection"),
    (aiohttp.ClientPayloadError, "the upstream broke off in the middle of its answer"),
    (aiohttp.TooManyRedirects, "the upstream redirected too many times"),
    (aiohttp.RedirectClientError, "the upstream redirected to an address that is not http(s)"),
    (aiohttp.InvalidURL, "the source's address is not a valid http(s) URL"),
    (aiohttp.NonHttpUrlClientError, "the source's address is not a valid http(s) URL"),
    (aiohttp.ClientResponseError, "the upstream's answer is not valid HTTP"),
)


def failure_reason(error: BaseException) -> str:
    """``error``, the reason a source failed, as a short clause: "connection refused", "the
    upstream broke off in the middle of its answer"; never the error's own text."""
    for kind, sentence in SENTENCES:
        if isinstance(error, kind):
            return sentence
    if isinstance(error, aiohttp.ClientConnectorError):
        cause = error.os_error
        if isinstance(cause, UpstreamDenied):
            return str(cause)  # the project's own sentence
        if isinstance(cause, socket.gaierror):
            return f"host not found ({cause.strerror})"
        return _os_words(cause.errno) or "the upstream could not be reached"
    if isinstance(error, aiohttp.ClientOSError):
        return _os_words(error.errno) or CONNECTION_FAILED
    if isinstance(error, aiohttp.ClientError):
        return CONNECTION_FAILED
    return UNEXPECTED


def failure_detail(error: BaseException) -> str:
    """What the log says of ``error``: its kind and text, and those of its causes."""
    parts: list[str] = []
    link: BaseException | None = error
    while link is not None and len(parts) < 5:
        parts.append(f"{type(link).__name__}: {link}" if str(link) else type(link).__name__)
        link = link.__cause__ or link.__context__
    return "; from ".join(parts)


def _os_words(errno: int | None) -> str:
    """The C library's words for ``errno``, in lower case: "connection refused"."""
    if not errno:
        return ""
    text = os.strerror(errno)
    return text[:1].lower() + text[1:]
