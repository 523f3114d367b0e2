"""The weight-free ``classic`` engine: graph cuts from clicks, optical flow to propagate
(:mod:`~segmentation.engines.classic.engine`; its parts beside it: the click cut, the colour
model, the propagation's cut, edge colours, flow, the crop box, and the graph cut itself)."""

from __future__ import annotations

from segmentation.engines.classic.engine import ClassicEngine, ClassicOptions

__all__ = ["ClassicEngine", "ClassicOptions"]
