"""WebSocket closes with the protocol's own codes, such as 1008 (policy violation).

daphne hands an application's close code to autobahn's ``sendClose``, which takes only 1000 and
3000-4999 (the codes an application may register): a consumer's 1008 (``core/message_budget.py``)
failed with a traceback, and the client saw 1011. The server is an endpoint, which RFC 6455
(section 7.4.1) lets send those codes: they go out as the close frame they name.
"""

from __future__ import annotations

from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol

# RFC 6455 section 7.4.1: the codes an endpoint may send (1005, 1006 and 1015 never go on the
# wire); 3000-4999 are the applications' own.
ENDPOINT_CODES = frozenset({1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011})


class EndpointCloseProtocol(WebSocketProtocol):
    def serverClose(self, code: int | None = None) -> None:
        if code in ENDPOINT_CODES:
            self.sendCloseFrame(code=code, isReply=False)
            return
        super().serverClose(code=code)


class EndpointCloseFactory(WebSocketFactory):
    protocol = EndpointCloseProtocol
