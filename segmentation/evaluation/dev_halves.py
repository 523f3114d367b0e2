"""The development set's two fixed halves, for cheap cross-validation of engine changes.

The 19 DAVIS 2016 sequences of ``../shared/data/vos`` are split by their alphabetical order:
every other sequence, starting with the first, is in half A, the rest in half B. The split was
fixed before any figure was taken on it and is never to be chosen by results. A change to an
engine is kept only when it helps the mean of both halves (docs/segmentation-quality.md).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TypeVar

HALVES: dict[str, tuple[str, ...]] = {
    "A": (
        "bear",
        "bmx-bumps",
        "car-shadow",
        "dog-agility",
        "hockey",
        "mallard-fly",
        "motorbike",
        "rollerblade",
        "surf",
        "tennis",
    ),
    "B": (
        "blackswan",
        "boat",
        "dance-jump",
        "drift-turn",
        "kite-walk",
        "motocross-bumps",
        "paragliding",
        "scooter-gray",
        "swing",
    ),
}

Result = TypeVar("Result")


def halves_means(
    found: Mapping[str, Result], mean: Callable[[list[Result]], dict[str, object]]
) -> dict[str, dict[str, object]]:
    """Each half's ``mean`` of the results found for it; only when every sequence of both halves
    was measured (empty otherwise: a half's mean over some of its sequences would mislead)."""
    if not all(name in found for names in HALVES.values() for name in names):
        return {}
    return {half: mean([found[name] for name in names]) for half, names in HALVES.items()}
