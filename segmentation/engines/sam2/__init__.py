"""SAM 2 and SAM 2.1 in plain PyTorch, loading the official checkpoints.

Modules, from the bottom up: :mod:`.layers` (attention, position encodings), :mod:`.config`
(model sizes), :mod:`.image_encoder` (Hiera and its neck), :mod:`.mask_decoder` (prompt encoder
and mask decoder), :mod:`.memory` (memory encoder and attention), :mod:`.model` (the network),
:mod:`.checkpoint` (files), :mod:`.tracker` (a video's prompts and memory bank) and
:mod:`.engine` (the engine interface).
"""
