"""Generated ``addPoints`` prompts with a box (hypothesis), each with the answer the API defines
for it: a valid box (two points labelled 2 and 3, first, clicks after them), or a valid box
with exactly one thing wrong, paired with the message that thing is refused with
(docs/segmentation-api.md). One fault at a time, so the expected message never depends on
which of several checks runs first."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

TWO_BOXES = "at most one box (one point labelled 2 and one labelled 3)"
PAIRING = (
    "a box is a point labelled 2 (top-left) followed by one labelled 3 (bottom-right), "
    "before any clicks"
)
OUTSIDE = "a box must lie inside the frame (corners normalized to [0, 1])"
AREA = (
    "a box's top-left corner (label 2) must be above and left of its bottom-right corner "
    "(label 3), with an area"
)
KEEP = "a box replaces the object's points on the frame: clear old points"

FAULTS = {
    "none": None,
    "no area": AREA,
    "upside down": AREA,
    "outside": OUTSIDE,
    "corners swapped": PAIRING,
    "lone 2": PAIRING,
    "lone 3": PAIRING,
    "after a click": PAIRING,
    "two boxes": TWO_BOXES,
    "old points kept": KEEP,
}


@dataclass(frozen=True)
class BoxPrompt:
    points: list[list[float]]
    labels: list[int]
    clear_old_points: bool
    fault: str
    message: str | None  # None: accepted


UNIT = st.floats(0, 1)
CLICKS = st.lists(st.tuples(st.tuples(UNIT, UNIT), st.integers(0, 1)), max_size=3)


@st.composite
def spans(draw: st.DrawFn) -> tuple[float, float]:
    """Two coordinates, the first strictly smaller: sometimes far apart, sometimes a float's
    width apart (less than a pixel on any frame, which the API still accepts)."""
    low = draw(UNIT)
    high = min(draw(st.one_of(UNIT, st.just(low + 1e-9)).filter(lambda x: x > low)), 1.0)
    return (low, high) if low < high else (0.0, 1.0)


@st.composite
def box_prompts(draw: st.DrawFn, faults: tuple[str, ...] = tuple(FAULTS)) -> BoxPrompt:
    (left, right), (top, bottom) = draw(spans()), draw(spans())
    fault = draw(st.sampled_from(faults))
    clicks = draw(CLICKS)
    points = [[x, y] for (x, y), _ in clicks]
    labels = [label for _, label in clicks]
    corners, kinds = [[left, top], [right, bottom]], [2, 3]
    clear = True
    if fault == "no area":
        if draw(st.booleans()):
            corners[1][0] = left
        else:
            corners[1][1] = top
    elif fault == "upside down":  # the corners' x or y (or both) exchanged
        which = draw(st.sampled_from([(0,), (1,), (0, 1)]))
        for axis in which:
            corners[0][axis], corners[1][axis] = corners[1][axis], corners[0][axis]
    elif fault == "outside":  # one coordinate past an edge, the corners still in order
        corner, axis = draw(st.integers(0, 1)), draw(st.integers(0, 1))
        beyond = draw(st.floats(1e-6, 1e6))
        corners[corner][axis] = -beyond if corner == 0 else 1 + beyond
    elif fault == "corners swapped":
        corners, kinds = corners[::-1], kinds[::-1]
    elif fault in ("lone 2", "lone 3"):
        keep = 0 if fault == "lone 2" else 1
        corners, kinds = [corners[keep]], [kinds[keep]]
        if draw(st.booleans()):  # at the end instead of first
            corners, kinds = points + corners, labels + kinds
            points, labels = [], []
    elif fault == "after a click":
        click = [[draw(UNIT), draw(UNIT)]], [draw(st.integers(0, 1))]
        corners, kinds = click[0] + corners, click[1] + kinds
    elif fault == "two boxes":
        (left2, right2), (top2, bottom2) = draw(spans()), draw(spans())
        points += [[left2, top2], [right2, bottom2]]
        labels += [2, 3]
    elif fault == "old points kept":
        clear = False
    return BoxPrompt(corners + points, kinds + labels, clear, fault, FAULTS[fault])
