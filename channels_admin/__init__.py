"""IPTV channel admin: an M3U playlist, one active channel, and a fan-out stream at /ts."""
