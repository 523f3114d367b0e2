"""EdgeTAM as a model of the ``sam2`` engine: objects tracked together (EdgeTAM's own predictor
fails there), and the official checkpoint layout served by name through the GraphQL API."""

from __future__ import annotations

import numpy as np
import pytest
import requests
import torch

from segmentation.engines import engine_create
from segmentation.engines.sam2.config import MODEL_SIZES
from segmentation.engines.sam2.engine import Sam2Engine
from segmentation.engines.sam2.model import Sam2Model
from segmentation.rle import rle_decode
from tests.conftest import manage, migrated, project_env, running_server
from tests.segmentation.engines.sam2.conftest import AUTO_DEVICE, DEVICES
from tests.segmentation.engines.sam2.small import SMALL_EDGETAM, small_checkpoint
from tests.segmentation.synthetic import HEIGHT, WIDTH, make_video, write_mp4
from tests.segmentation.test_propagation_stream import graphql, start_session


@pytest.fixture(scope="module", params=DEVICES)
def engine(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Sam2Engine:
    path = tmp_path_factory.mktemp("edgetam") / "small.pt"
    checkpoint = small_checkpoint(path, config=SMALL_EDGETAM)
    options = {"checkpoint": str(checkpoint), "device": request.param, "precision": "float32"}
    return engine_create("sam2", options)


def test_three_objects_propagate_together_as_one_batch(engine: Sam2Engine, frames) -> None:
    # given three objects clicked on one frame
    batches: list[int] = []
    perceiver = engine.model.spatial_perceiver
    compress = perceiver.forward
    perceiver.forward = lambda memory, pos: batches.append(len(memory)) or compress(memory, pos)
    state = engine.open(frames)
    for object_id, x in ((1, 0.3), (2, 0.7), (3, 0.5)):
        state.add_points(frame_index=4, object_id=object_id, points=[[x, 0.5]], labels=[1])

    # when they are propagated through the video
    try:
        tracked = list(state.propagate(start_frame_index=4))
    finally:
        perceiver.forward = compress
        state.close()

    # then every frame has the three objects' masks, and each memory was made for all three
    # at once: the clicked frame's three (one per object), then one batch per tracked frame
    assert [index for index, _ in tracked] == [4, 5, 6, 7, 8, 9, 10, 11, 3, 2, 1, 0]
    assert all(list(masks) == [1, 2, 3] for _, masks in tracked)
    assert all(m.shape == (HEIGHT, WIDTH) for _, masks in tracked for m in masks.values())
    assert batches == [1, 1, 1] + [3] * 11


def test_the_official_layout_in_the_models_folder_answers_by_default(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    # given EdgeTAM's full model with random weights, saved as edgetam.pt is: its state dict
    # alone, under "model", in the models folder, and no engine named
    var = tmp_path_factory.mktemp("edgetam-var")
    (var / "models").mkdir()
    torch.manual_seed(0)
    model = Sam2Model(MODEL_SIZES["edgetam"])
    with torch.no_grad():
        model.sam_mask_decoder.pred_obj_score_head.layers[-1].bias.fill_(2.0)
    torch.save({"model": model.state_dict()}, var / "models" / "edgetam.pt")
    videos = tmp_path_factory.mktemp("edgetam-videos")
    write_mp4(make_video(4), videos / "short.mp4")
    settings = {"SAM2_PRECISION": "float32"}
    env = project_env(var, **settings)
    migrated(env)
    assert manage("import_videos", str(videos), env=env).returncode == 0

    # when the server starts and a click arrives
    with running_server(var, **settings) as server:
        health = requests.get(f"{server}/healthz", timeout=10).json()
        annotator = requests.get(f"{server}/annotate/", timeout=10).text
        session_id = start_session(server, "gallery/short.mp4")
        clicked = graphql(
            server,
            """mutation($input: AddPointsInput!) {
                 addPoints(input: $input) {
                   frameIndex rleMaskList { objectId rleMask { size counts } }
                 }
               }""",
            input={
                "sessionId": session_id,
                "frameIndex": 1,
                "clearOldPoints": True,
                "objectId": 1,
                "labels": [1],
                "points": [[0.3, 0.5]],
            },
        )

    # then EdgeTAM answers, named by the start-up log and the page, and the click has its mask
    assert (health["engine"], health["engine_model"], health["engine_chosen_because"]) == (
        "sam2",
        f"EdgeTAM on {AUTO_DEVICE} (float32)",
        f"edgetam.pt in {var / 'models'}",
    )
    started = (var / "daphne.log").read_text()
    named = f"EdgeTAM on {AUTO_DEVICE} (float32) (edgetam.pt in {var / 'models'})"
    assert f"segmentation engine: {named}" in started
    assert f'">Engine: EdgeTAM on {AUTO_DEVICE} (float32)</span>' in annotator
    answer = clicked["data"]["addPoints"]
    assert answer["frameIndex"] == 1
    assert [item["objectId"] for item in answer["rleMaskList"]] == [1]
    mask = rle_decode(answer["rleMaskList"][0]["rleMask"])
    assert mask.shape == (HEIGHT, WIDTH)
    assert mask.dtype == np.bool_
