"""Segmentation across inference workers: sessions live in worker processes, each holding one
engine, and web processes route every operation on a session to its worker through the channel
layer (Redis). See docs/deploy.md for the layout."""
