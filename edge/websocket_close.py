"""WebSocket connections closed by the server with the protocol's own codes: 1008 (policy
violation) for a client past its message budget, taken as each frame arrives.

daphne hands an application's close code to autobahn's ``sendClose``, which takes only 1000 and
3000-4999 (the codes an application may register): a consumer's 1008 failed with a traceback,
and the client saw 1011. The server is an endpoint, which RFC 6455 (section 7.4.1) lets send
those codes: they go out as the close frame they name.

Each data frame takes a token of the connection's budget (``core/message_budget.py``) as autobahn
decodes it, in the event loop, before daphne puts its message on the application's queue. Taken
in the consumer instead, behind that queue (which daphne does not bound), the close of a fast
flood waited behind every frame read before it: 523,119 frames in 10 s, never closed, every
other request held back for seconds (issue 47). Here the first frame past the budget, or a
message that finds :data:`MAX_QUEUED` messages the application has not taken yet, closes the
connection with 1008; nothing more reaches the application. The server reads on for
:data:`AFTER_CLOSE_BYTES` (room for the client's answering close), then stops reading; a client
that has not completed the close within autobahn's ``closeHandshakeTimeout`` (1 s) is dropped.
What the application still sends to a connection closed or closing under it is dropped, not
raised into it.
"""

from __future__ import annotations

import logging
from typing import Any

from daphne.ws_protocol import WebSocketFactory, WebSocketProtocol

from core.message_budget import POLICY_VIOLATION, TokenBucket, message_budget
from edge.websocket_admission import websocket_admission

logger = logging.getLogger(__name__)

# RFC 6455 section 7.4.1: the codes an endpoint may send (1005, 1006 and 1015 never go on the
# wire); 3000-4999 are the applications' own.
ENDPOINT_CODES = frozenset({1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011})
# Messages a connection's application may leave untaken before the connection is closed.
MAX_QUEUED = 64
# What is read of a connection after its close is sent, for the client's answering close.
AFTER_CLOSE_BYTES = 64 * 1024


class EndpointCloseProtocol(WebSocketProtocol):
    _budget: TokenBucket | None = None
    _budget_read = False
    _refused = False
    _after_close = 0
    admitted_client: str | None = None  # its count of open connections, ended when it closes

    def serverSend(self, content: str | bytes, binary: bool = False) -> None:
        # What the application sends to a connection closed or closing under it (refused, or
        # its client gone while the application was still connecting) is dropped: autobahn
        # would raise "Attempt to send on a closed protocol" into the application.
        if self._refused or self.state in (self.STATE_CLOSING, self.STATE_CLOSED):
            return
        super().serverSend(content, binary)

    def serverClose(self, code: int | None = None) -> None:
        if code in ENDPOINT_CODES:
            self.sendCloseFrame(code=code, isReply=False)
            return
        super().serverClose(code=code)

    def onFrameBegin(self) -> None:
        super().onFrameBegin()
        if self.current_frame.opcode > 7 or self._refused:  # a control frame (ping, close)
            return
        if not self._budget_read:
            self._budget, self._budget_read = message_budget(), True
        if self._budget is not None and not self._budget.take():
            self._refuse("past its message budget")

    def onMessage(self, payload: bytes, isBinary: bool) -> None:
        if self._refused:
            return
        queue = getattr(self, "application_queue", None)
        if queue is not None and queue.qsize() >= MAX_QUEUED:
            self._refuse(f"{MAX_QUEUED} messages ahead of the application")
            return
        super().onMessage(payload, isBinary)

    def _dataReceived(self, data: bytes) -> None:
        if self._refused:
            self._after_close += len(data)
            if self._after_close > AFTER_CLOSE_BYTES:
                # a flood still arriving: read no more of it, and let the close's timeout drop it
                self.data = b""
                self.transport.pauseProducing()
                return
        super()._dataReceived(data)

    def connectionLost(self, reason: Any) -> None:
        client, self.admitted_client = self.admitted_client, None
        if client is not None:
            websocket_admission().release(client)
        super().connectionLost(reason)

    def _refuse(self, why: str) -> None:
        self._refused = True
        logger.info("WebSocket %s closed with 1008: %s", self.request.path, why)
        self.sendCloseFrame(code=POLICY_VIOLATION, isReply=False)


class EndpointCloseFactory(WebSocketFactory):
    protocol = EndpointCloseProtocol
    # The client address the upgrade being made was admitted for (edge/websocket_admission.py),
    # set by the request around daphne's call to build its protocol.
    upgrading_client: str | None = None

    def buildProtocol(self, addr: Any) -> EndpointCloseProtocol:
        protocol = super().buildProtocol(addr)
        protocol.admitted_client, self.upgrading_client = self.upgrading_client, None
        return protocol
