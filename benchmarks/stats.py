"""Summaries the benchmark scripts print."""

from __future__ import annotations


def nearest_rank(values: list[float], share: float) -> float:
    """The value ``share`` of the way through ``values`` in order (nearest rank; 0.9: p90)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]
