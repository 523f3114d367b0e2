"""The prompt encoder's point tokens, boxes among them, against SAM's own computation."""

from __future__ import annotations

import torch

from segmentation.engines.sam2.mask_decoder import PromptEncoder


def encoder() -> PromptEncoder:
    torch.manual_seed(0)
    return PromptEncoder(embed_dim=32, feature_size=8, image_size=128).eval()


def test_a_box_is_two_points_with_the_corners_embeddings_before_the_clicks() -> None:
    prompt_encoder = encoder()
    # a box (labels 2 and 3, first, as SAM 2's predictor puts them) and a negative click
    points = torch.tensor([[[10.0, 20.0], [100.0, 90.0], [50.0, 60.0]]])
    labels = torch.tensor([[2, 3, 0]], dtype=torch.int32)

    with torch.no_grad():
        tokens, dense = prompt_encoder(points, labels, None)

        # SAM's PromptEncoder._embed_points: pixel centres, a padding point, the Fourier
        # encoding, then each label's embedding added (the padding's replaces it)
        padded = torch.cat([points + 0.5, torch.zeros(1, 1, 2)], dim=1)
        expected = prompt_encoder.pe_layer.encode(padded / 128)
        embeddings = prompt_encoder.point_embeddings
        expected[0, 0] += embeddings[2].weight[0]
        expected[0, 1] += embeddings[3].weight[0]
        expected[0, 2] += embeddings[0].weight[0]
        expected[0, 3] = prompt_encoder.not_a_point_embed.weight[0]
    assert tokens.shape == (1, 4, 32)
    assert torch.equal(tokens, expected)
    assert dense.shape == (1, 32, 8, 8)
