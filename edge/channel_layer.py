"""The Redis channel layer, with a send and a receive that cost one round trip to Redis each.

Segmentation requests to inference workers and their answers (segmentation/workers/) travel on
the path of every click and every propagated frame, so:

- ``send``: channels_redis trims expired messages, counts the channel, adds the message and
  renews the channel's expiry as four commands, each awaited in turn. Here the same four steps
  run as one script on the server, with the same capacity check (``ChannelFull`` when the
  channel holds its capacity) and the same stored form.
- ``receive`` on a named channel (one without ``!``): channels_redis moves each message it pops
  into a backup set and deletes it from there once handed over, three more commands, so that a
  receive cancelled in between loses nothing. Here a named channel's message is popped and
  handed over. The channels read this way (a worker's requests, a web process's answers) are
  read by one loop each for the life of its process, which a cancel ends anyway. Process-local
  channels (``!``: the consumers' own) keep channels_redis's receive.
"""

from __future__ import annotations

import time

from channels.exceptions import ChannelFull
from channels_redis.core import RedisChannelLayer

# KEYS[1] the channel's sorted set; ARGV: expired-before, capacity, message, now, expiry (s)
_SEND = """
redis.call('ZREMRANGEBYSCORE', KEYS[1], 0, ARGV[1])
if redis.call('ZCOUNT', KEYS[1], '-inf', '+inf') >= tonumber(ARGV[2]) then return 0 end
redis.call('ZADD', KEYS[1], ARGV[4], ARGV[3])
redis.call('EXPIRE', KEYS[1], ARGV[5])
return 1
"""


class OneTripRedisChannelLayer(RedisChannelLayer):
    async def send(self, channel: str, message: dict) -> None:
        if not isinstance(message, dict) or "__asgi_channel__" in message:
            raise TypeError("a message is a dict without the key __asgi_channel__")
        self.require_valid_channel_name(channel)  # raises TypeError for a bad name
        key_name = channel
        if "!" in channel:  # a process-local channel: the message carries its full name
            message = {**message, "__asgi_channel__": channel}
            key_name = self.non_local_name(channel)
            index = self.consistent_hash(channel)
        else:
            index = next(self._send_index_generator)
        now = time.time()
        added = await self.connection(index).eval(
            _SEND,
            1,
            self.prefix + key_name,
            int(now) - int(self.expiry),
            self.get_capacity(channel),
            self.serialize(message),
            now,
            int(self.expiry),
        )
        if not added:
            raise ChannelFull()

    async def receive_single(self, channel: str) -> tuple[str, dict]:
        if "!" in channel:
            return await super().receive_single(channel)
        self.require_valid_channel_name(channel, receive=True)
        connection = self.connection(next(self._receive_index_generator))
        while True:
            popped = await connection.bzpopmin(self.prefix + channel, timeout=self.brpop_timeout)
            if popped is not None:
                return channel, self.deserialize(popped[1])
