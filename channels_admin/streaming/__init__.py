"""The streaming core of the channel admin, which knows nothing about Django: bytes come in
from an upstream (MPEG-TS or HLS, through the Redis relay across processes), whole TS packets
go out to subscriptions, and a guard decides who may join. The Django app builds one hub per
process (``channels_admin/runtime.py``) and turns its events into database rows and HTTP; like
``segmentation/engines/``, nothing here imports Django, so it can be run, measured and tested
on its own."""
