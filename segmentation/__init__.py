"""Interactive video segmentation: the SAM 2 demo GraphQL API over pluggable engines."""
