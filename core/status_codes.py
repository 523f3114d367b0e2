"""Error codes that carry the HTTP status they are answered with: each app's ``ErrorCode`` is a
:class:`StatusCode`, so that a failure's code and its status are declared together, once."""

from __future__ import annotations

import enum


class StatusCode(enum.StrEnum):
    """A stable code (its value), and :attr:`http_status`; members are declared as
    ``NAME = "NAME", status``."""

    http_status: int

    def __new__(cls, value: str, http_status: int) -> StatusCode:
        member = str.__new__(cls, value)
        member._value_ = value
        member.http_status = http_status
        return member
