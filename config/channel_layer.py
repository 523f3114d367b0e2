"""The Redis channel layer, with a send that costs one round trip to Redis instead of four.

channels_redis's ``send`` trims expired messages, counts the channel, adds the message and
renews the channel's expiry as four commands, each awaited in turn. Segmentation requests to
inference workers and their answers (segmentation/workers/) are sends on the path of every
click, so here the same four steps run as one script on the server, with the same capacity
check (``ChannelFull`` when the channel holds its capacity) and the same stored form.
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
