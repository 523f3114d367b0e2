"""The ``sam2`` engine behind the engine interface, the GraphQL API and the propagation stream,
with a small random checkpoint on the CPU and real video files."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import requests
import torch

from config.env import env_named_options
from segmentation.engines import EngineConfigError, engine_create, engine_options
from segmentation.engines.base import VideoState
from segmentation.engines.frames import VideoFileFrames
from segmentation.engines.sam2.engine import Sam2Engine, model_compile
from segmentation.evaluation.metrics import region_similarity
from segmentation.rle import rle_decode
from tests.conftest import manage, migrated, project_env, running_server, server_import
from tests.segmentation.engines.sam2.conftest import DEVICES
from tests.segmentation.engines.sam2.small import small_checkpoint, small_model
from tests.segmentation.synthetic import HEIGHT, WIDTH, Video, make_video, write_davis, write_mp4
from tests.segmentation.test_propagation_stream import graphql, parts, propagate, start_session


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return small_checkpoint(tmp_path_factory.mktemp("sam2") / "small.pt")


@pytest.fixture(scope="module", params=DEVICES)
def engine(checkpoint: Path, request: pytest.FixtureRequest) -> Sam2Engine:
    return engine_create("sam2", {"checkpoint": str(checkpoint), "device": request.param})


@pytest.fixture
def sam2_state(engine: Sam2Engine, frames):
    state = engine.open(frames)
    yield state
    state.close()


def test_checkpoint_option_is_required() -> None:
    with pytest.raises(EngineConfigError) as error:
        engine_options("sam2", {})

    assert str(error.value) == "option 'checkpoint' is required (set SAM2_CHECKPOINT)"


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"device": "tpu"}, "device must be one of auto, cuda, mps, cpu, got 'tpu'"),
        ({"model_size": "huge"}, "model_size must be one of tiny, small, base_plus, large, "),
        ({"compile": "maybe"}, "option 'compile' must be a boolean (1/0, true/false), got 'maybe'"),
        (
            {"compile_mode": "fast"},
            "compile_mode must be one of default, reduce-overhead, max-autotune, "
            "max-autotune-no-cudagraphs, got 'fast'",
        ),
    ],
)
def test_bad_options(checkpoint: Path, raw: dict[str, str], message: str) -> None:
    with pytest.raises(EngineConfigError) as error:
        engine_options("sam2", {"checkpoint": str(checkpoint), **raw})

    assert str(error.value).startswith(message)


def test_compiling_wraps_each_per_frame_part_on_a_device_other_than_the_cpu() -> None:
    # the meta device stands for a GPU: no CPU-only step applies (torch.compile is lazy, so
    # nothing is compiled until a part is called)
    model = small_model().to("meta")
    parts = (model.memory_attention, model.memory_encoder, model.sam_mask_decoder)
    plain = [part.forward for part in parts]

    encode = model_compile(model, "default")

    assert callable(encode)
    assert all(part.forward is not forward for part, forward in zip(parts, plain, strict=True))


def test_settings_come_from_their_own_variables() -> None:
    names = {"SAM2_CHECKPOINT": "checkpoint", "SAM2_DEVICE": "device", "SAM2_COMPILE": "compile"}

    options = env_named_options(names, environ={"SAM2_CHECKPOINT": " /w/t.pt ", "SAM2_DEVICE": ""})

    assert options == {"checkpoint": "/w/t.pt"}


def test_clicks_give_video_sized_masks_that_never_overlap(sam2_state) -> None:
    first = sam2_state.add_points(frame_index=2, object_id=1, points=[[0.3, 0.5]], labels=[1])
    masks = sam2_state.add_points(
        frame_index=2, object_id=5, points=[[0.7, 0.45], [0.3, 0.5]], labels=[1, 0]
    )

    assert list(first) == [1]
    assert list(masks) == [1, 5]
    assert all(m.shape == (HEIGHT, WIDTH) and m.dtype == bool for m in masks.values())
    assert not (masks[1] & masks[5]).any()
    assert list(sam2_state.masks(frame_index=2)) == [1, 5]
    assert np.array_equal(sam2_state.masks(frame_index=2)[1], masks[1])


def test_a_box_gives_a_mask_and_reaches_the_model_before_the_clicks(sam2_state) -> None:
    boxed = sam2_state.add_points(
        frame_index=2, object_id=1, points=[[0.25, 0.5], [0.75, 1.0]], labels=[2, 3]
    )
    masks = sam2_state.add_points(
        frame_index=2, object_id=1, points=[[0.5, 0.75]], labels=[0], clear_old_points=False
    )

    assert list(boxed) == [1]
    assert boxed[1].shape == (HEIGHT, WIDTH)
    assert boxed[1].dtype == bool
    assert list(masks) == [1]
    # as SAM 2's predictor gives them to the prompt encoder: the corners, then the clicks, in
    # pixels of the model's input (128 x 128)
    coords, kinds = sam2_state.tracker.tracks[1].clicks[2]
    assert kinds.tolist() == [[2, 3, 0]]
    assert coords.tolist() == [[[32.0, 64.0], [96.0, 128.0], [64.0, 96.0]]]


def test_propagation_visits_every_frame_and_is_repeatable(engine: Sam2Engine, frames) -> None:
    def run() -> list:
        state = engine.open(frames)
        state.add_points(frame_index=4, object_id=1, points=[[0.3, 0.5]], labels=[1])
        state.add_points(frame_index=4, object_id=2, points=[[0.7, 0.45]], labels=[1])
        tracked = list(state.propagate(start_frame_index=4))
        state.close()
        return tracked

    first, second = run(), run()

    assert [index for index, _ in first] == [4, 5, 6, 7, 8, 9, 10, 11, 3, 2, 1, 0]
    assert all(list(masks) == [1, 2] for _, masks in first)
    for (_, a), (_, b) in zip(first, second, strict=True):
        assert all(np.array_equal(a[k], b[k]) for k in a)


def test_each_propagated_frame_has_the_masks_tracked_on_it(engine: Sam2Engine, frames) -> None:
    state = engine.open(frames)
    state.add_points(frame_index=4, object_id=1, points=[[0.3, 0.5]], labels=[1])
    state.add_points(frame_index=4, object_id=2, points=[[0.7, 0.45]], labels=[1])

    propagated = dict(state.propagate(start_frame_index=4))
    afterwards = {index: state.masks(frame_index=index) for index in range(len(frames))}
    state.close()

    assert sorted(propagated) == list(range(12))
    for index, masks in propagated.items():
        assert list(masks) == [1, 2]
        assert all(np.array_equal(masks[k], afterwards[index][k]) for k in masks), index


def test_forgetting_prompts(sam2_state) -> None:
    sam2_state.add_points(frame_index=0, object_id=1, points=[[0.3, 0.5]], labels=[1])
    sam2_state.add_points(frame_index=0, object_id=2, points=[[0.7, 0.45]], labels=[1])

    cleared = sam2_state.clear_points_in_frame(frame_index=0, object_id=2)
    sam2_state.remove_object(object_id=1)
    after_removal = sam2_state.masks(frame_index=0)
    sam2_state.clear_points_in_video()

    assert list(cleared) == [1, 2]
    assert not cleared[2].any()
    assert list(after_removal) == [2]
    assert sam2_state.masks(frame_index=0) == {}
    assert sam2_state.tracker.tracks == {}


def test_an_object_without_prompts_is_empty_while_others_track(sam2_state) -> None:
    sam2_state.add_points(frame_index=0, object_id=1, points=[[0.3, 0.5]], labels=[1])
    sam2_state.add_points(frame_index=0, object_id=2, points=[[0.7, 0.45]], labels=[1])
    sam2_state.clear_points_in_frame(frame_index=0, object_id=2)

    tracked = list(sam2_state.propagate(start_frame_index=0))

    assert len(tracked) == 12
    assert all(not masks[2].any() for _, masks in tracked)


def test_features_cache_is_bounded(sam2_state, engine: Sam2Engine) -> None:
    sam2_state.add_points(frame_index=0, object_id=1, points=[[0.3, 0.5]], labels=[1])

    list(sam2_state.propagate(start_frame_index=0))

    assert len(sam2_state._features) == engine.options.feature_cache


def test_calls_at_once_on_the_cpu_share_the_cores_among_torchs_threads(
    engine: Sam2Engine,
) -> None:
    threads = torch.get_num_threads()

    counts = [engine.calls_at_once(cores) for cores in (1, threads, 3 * threads)]

    # on the CPU each call's operators take torch's threads; on a GPU, two calls at once
    assert counts == ([1, 1, 3] if engine.device.type == "cpu" else [2, 2, 2])


def test_evaluate_vos_runs_the_sam2_engine(video: Video, checkpoint: Path, tmp_path: Path) -> None:
    write_davis(video, tmp_path / "data" / "shapes")
    out = tmp_path / "scores.json"

    result = manage(
        "evaluate_vos",
        str(tmp_path / "data"),
        "--engine",
        "sam2",
        "--option",
        f"checkpoint={checkpoint}",
        "--option",
        "device=cpu",
        "--clicks",
        "1",
        "--json",
        str(out),
        env=project_env(tmp_path / "var"),
    )

    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("engine sam2\n")
    figures = json.loads(out.read_text())["clicks"]["1"]
    assert list(figures["sequences"]) == ["shapes"]
    assert 0.0 <= figures["mean"]["JF"] <= 1.0


@pytest.fixture(scope="module")
def server(checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    var = tmp_path_factory.mktemp("sam2-var")
    videos = tmp_path_factory.mktemp("sam2-videos")
    write_mp4(make_video(12), videos / "short.mp4")
    settings = {"SEGMENTATION_ENGINE": "sam2", "SAM2_CHECKPOINT": str(checkpoint)}
    env = project_env(var, **settings)
    migrated(env)
    imported = manage("import_videos", str(videos), env=env)
    assert imported.returncode == 0, imported.stderr
    with running_server(var, **settings) as base_url:
        yield base_url


def test_a_bad_checkpoint_stops_the_server_at_start(checkpoint: Path, tmp_path: Path) -> None:
    cut = tmp_path / "cut.pt"
    cut.write_bytes(checkpoint.read_bytes()[:1000])
    env = project_env(tmp_path, SEGMENTATION_ENGINE="sam2", SAM2_CHECKPOINT=str(cut))

    started = server_import(env)

    assert started.returncode == 1
    assert started.stderr.splitlines()[-1].startswith(
        "segmentation.engines.sam2.checkpoint.CheckpointError: cut.pt: cannot be read as a "
        "PyTorch checkpoint (truncated or not one?): "
    )


def test_server_reports_the_engine(server: str) -> None:
    assert requests.get(f"{server}/healthz", timeout=10).json()["engine"] == "sam2"


def test_api_and_stream_serve_sam2_masks(server: str) -> None:
    session_id = start_session(server, "gallery/short.mp4")
    clicked = graphql(
        server,
        """mutation($input: AddPointsInput!) {
             addPoints(input: $input) { frameIndex rleMaskList { objectId rleMask { size } } }
           }""",
        input={
            "sessionId": session_id,
            "frameIndex": 3,
            "clearOldPoints": True,
            "objectId": 1,
            "labels": [1],
            "points": [[0.3, 0.5]],
        },
    )

    with propagate(server, session_id, 3) as response:
        assert response.status_code == 200
        received = [json.loads(body) for _, body in parts(response)]

    assert clicked == {
        "data": {
            "addPoints": {
                "frameIndex": 3,
                "rleMaskList": [{"objectId": 1, "rleMask": {"size": [HEIGHT, WIDTH]}}],
            }
        }
    }
    assert [r["frame_index"] for r in received] == [3, 4, 5, 6, 7, 8, 9, 10, 11, 2, 1, 0]
    for data in received:
        assert [result["object_id"] for result in data["results"]] == [1]
        assert rle_decode(data["results"][0]["mask"]).shape == (HEIGHT, WIDTH)


def test_a_given_mask_is_the_frames_result_and_an_anchor(sam2_state, video: Video) -> None:
    given = video.masks[2][1]

    masks = sam2_state.add_mask(frame_index=2, object_id=1, mask=given)
    steps = dict(sam2_state.propagate(start_frame_index=2))

    # the mask comes back as given, up to the model's quarter-size logits
    assert region_similarity(masks[1], given) > 0.9
    assert np.array_equal(steps[2][1], masks[1])
    assert sorted(steps) == list(range(len(video.masks)))
    assert all(step[1].shape == (HEIGHT, WIDTH) for step in steps.values())


@pytest.mark.skipif("cuda" not in DEVICES, reason="this machine has no CUDA device")
def test_a_gpu_tracks_as_the_cpu_does(checkpoint: Path, frames) -> None:
    # given the same checkpoint in float32 on both devices (float32 asked for: no TF32 on the GPU)
    def tracked(device: str) -> dict[int, dict[int, np.ndarray]]:
        options = {"checkpoint": str(checkpoint), "device": device, "precision": "float32"}
        state = engine_create("sam2", options).open(frames)
        state.add_points(frame_index=4, object_id=1, points=[[0.3, 0.5]], labels=[1])
        state.add_points(frame_index=4, object_id=2, points=[[0.7, 0.45]], labels=[1])
        masks = dict(state.propagate(start_frame_index=4))
        state.close()
        return masks

    # when both propagate the same clicks
    on_cpu, on_gpu = tracked("cpu"), tracked("cuda")

    # then every frame's masks agree but for rounding at their edges (in TF32, 4% of a tracked
    # frame's pixels differed: this small random model's logits are near zero in many places)
    assert sorted(on_gpu) == sorted(on_cpu) == list(range(12))
    for index, masks in on_cpu.items():
        for object_id, mask in masks.items():
            agree = (mask == on_gpu[index][object_id]).mean()
            assert agree >= 0.995, (index, object_id, agree)


@pytest.mark.skipif("cuda" not in DEVICES, reason="this machine has no CUDA device")
def test_the_memory_bank_out_of_reach_goes_to_the_host_and_tracks_as_on_the_device(
    checkpoint: Path, tmp_path: Path
) -> None:
    # given a video longer than a memory's reach (16 frames here)
    video = write_mp4(make_video(frame_count=40), tmp_path / "long.mp4")
    options = {"checkpoint": str(checkpoint), "device": "cuda", "precision": "float32"}
    engine = engine_create("sam2", options)

    def tracked(offload: bool) -> tuple[list[dict], VideoState]:
        state = engine.open(VideoFileFrames(video))
        state.tracker.offload = offload
        state.add_points(frame_index=0, object_id=1, points=[[0.3, 0.5]], labels=[1])
        state.add_points(frame_index=0, object_id=2, points=[[0.7, 0.45]], labels=[1])
        passes = [dict(state.propagate(start_frame_index=0))]
        # a correction on a frame whose memories are on the host, then the video again
        state.add_points(frame_index=3, object_id=1, points=[[0.35, 0.5]], labels=[1])
        passes.append(dict(state.propagate(start_frame_index=0)))
        return passes, state

    # when it is tracked with the memory bank moved to the host, and kept on the device
    (moved_first, moved_again), moved = tracked(offload=True)
    (kept_first, kept_again), kept = tracked(offload=False)

    # then every frame's masks are the same
    for moved_pass, kept_pass in ((moved_first, kept_first), (moved_again, kept_again)):
        assert sorted(moved_pass) == sorted(kept_pass) == list(range(40))
        for index, masks in kept_pass.items():
            assert all(np.array_equal(mask, moved_pass[index][k]) for k, mask in masks.items())
    # and exactly the tracked frames out of reach of the last one are on the host (prompted
    # frames stay on the device: 0, and 3 for object 1)
    assert moved.tracker.reach == 16
    for object_id, track in moved.tracker.tracks.items():
        on_host = [f for f, out in sorted(track.tracked.items()) if out.memory.device.type == "cpu"]
        assert on_host == [f for f in range(1, 40 - 16) if f != 3 or object_id == 2]
    assert all(out.memory.device.type == "cuda" for out in kept.tracker.tracks[1].tracked.values())
    for state in (moved, kept):
        state.close()
        state.frames.close()
