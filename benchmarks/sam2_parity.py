"""The ``sam2`` engine against SAM 2's own video predictor: the same weights, frames and clicks.

    PYTHONPATH=<where sam2==1.1.0 is> .venv/bin/python benchmarks/sam2_parity.py
        [--device cuda] [--precision bfloat16|float32] [--version 2.1|2.0|edgetam]
        [--size tiny|small|base_plus|large] [--frames 8]

The official package (``sam2==1.1.0``) is not a dependency of this project: install it in a
throwaway environment (``SAM2_BUILD_CUDA=0`` is enough) and put it on ``PYTHONPATH``. Its model of
``--size`` (tiny by default; EdgeTAM has one size) is built with random weights (seeded; the
object-score head leans towards "object present" so that objects are seen, and the mask head's last
layer is scaled so that logits reach the size a trained model's do), saved in the official layout
and loaded here from that file. Both get the same normalized 1024x1024 frames of a drawn 480x360
video and the same clicks, and answer at the video's resolution (the official predictor's bilinear
upsampling of its 256x256 logits, applied to ours too). Scenarios: the clicked frame; a forward
pass with one object; two objects clicked on different frames (forward from frame 0, backward from
frame 3, then a correction click on a tracked frame and a new forward pass); two objects clicked on
one frame (tracked as one batch); an object given as a mask (SAM 2's ``add_new_mask``) beside a
clicked one, propagated, then clicked on a tracked frame and propagated again; an object given by a
box (``box=``; ours: the corners labelled 2 and 3 before the clicks, as our API sends them), then
the box and a click on that frame, propagated, then a box on a tracked frame and propagated again.

``--precision bfloat16`` runs both under bfloat16 autocast with TF32 matrix products, as both
run on CUDA; ``float32`` runs plain float32 (TF32 off), which checks the logic to rounding.
Prints, per compared output and in total, the largest logit difference and the agreement of
mask signs where the reference's logit is clearly away from zero (``|logit| >= --margin``).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.sam2_speed import DrawnFrames, edgetam_prepared, model_inputs
from segmentation.engines.sam2.engine import Sam2Engine, Sam2Options

CONFIGS = {
    "2.1": "configs/sam2.1/sam2.1_hiera_{}.yaml",
    "2.0": "configs/sam2/sam2_hiera_{}.yaml",
    "edgetam": "configs/edgetam.yaml",
}
SIZES = {"tiny": "t", "small": "s", "base_plus": "b+", "large": "l"}
# EdgeTAM's predictor is SAM 2's of before December 2024: one memory bank for all objects, so
# that an object clicked on a frame gives every other object a conditioning frame there (an
# empty one if it had no result there). This engine keeps each object's own, as SAM 2's current
# predictor does; the two agree where that makes no difference: one object, or objects clicked
# on the same frames ("two" and "mask" differ there by design).
DEFAULT_SCENARIOS = {False: "one,two,batch,mask,box", True: "one,correction,batch,box"}
WIDTH, HEIGHT = 480, 360
LOGIT_SCALE = 30.0


def official_predictor(
    version: str, device: torch.device, checkpoint: Path | None, size: str = "tiny"
):
    from sam2.build_sam import build_sam2_video_predictor

    if version == "edgetam":
        edgetam_prepared()

    overrides = [
        # the demo's settings (what `apply_postprocessing` sets), holes left unfilled on both
        "++model.sam_mask_decoder_extra_args.dynamic_multimask_via_stability=true",
        "++model.sam_mask_decoder_extra_args.dynamic_multimask_stability_delta=0.05",
        "++model.sam_mask_decoder_extra_args.dynamic_multimask_stability_thresh=0.98",
        "++model.binarize_mask_from_pts_for_mem_enc=true",
        "++model.fill_hole_area=0",
        # this engine keeps corrected frames as conditioning frames (its default)
        "++model.add_all_frames_to_correct_as_cond=true",
    ]
    return build_sam2_video_predictor(
        CONFIGS[version].format(SIZES[size]),
        str(checkpoint) if checkpoint else None,
        device=device,
        apply_postprocessing=False,
        hydra_overrides_extra=overrides,
    )


def random_official_checkpoint(version: str, path: Path, size: str = "tiny") -> Path:
    torch.manual_seed(0)
    model = official_predictor(version, torch.device("cpu"), None, size)
    with torch.no_grad():
        for norm in model.modules():  # EdgeTAM's trunk: batch norms with statistics to fold
            if isinstance(norm, torch.nn.BatchNorm2d):
                norm.running_mean.normal_(0, 0.1)
                norm.running_var.uniform_(0.5, 1.5)
                norm.weight.normal_(1, 0.1)
                norm.bias.normal_(0, 0.1)
        model.sam_mask_decoder.pred_obj_score_head.layers[-1].bias.fill_(2.0)
        # logits of trained-model size (|logit| up to ~10s, not ~0.4), so that the mask signs
        # mean something where the bfloat16 comparison counts them
        for mlp in model.sam_mask_decoder.output_hypernetworks_mlps:
            mlp.layers[-1].weight.mul_(LOGIT_SCALE)
    torch.save({"model": model.state_dict()}, path)
    return path


def float_memories(predictor) -> None:
    """Without autocast the reference cannot attend to its bfloat16 memories when no object
    pointer is among them (its own concatenation makes them float32 whenever one is): give
    them to it as float32, as it does itself then."""
    forward = predictor.memory_attention.forward

    def patched(curr, memory, curr_pos=None, memory_pos=None, **kwargs):
        return forward(
            curr=curr,
            memory=memory.float(),
            curr_pos=curr_pos,
            memory_pos=memory_pos.float(),
            **kwargs,
        )

    predictor.memory_attention.forward = patched


class Pair:
    """One video open in both: ours as a session, the reference as its inference state."""

    def __init__(self, engine: Sam2Engine, predictor, images: torch.Tensor, frames) -> None:
        self.predictor, self.frames = predictor, frames
        self.ours = engine.open(frames)
        self.ours.model_input = lambda index: images[index : index + 1]
        import sam2.sam2_video_predictor as official

        official.load_video_frames = lambda **_: (images, frames.height, frames.width)
        self.theirs = predictor.init_state(video_path="drawn")
        self.compared: list[dict] = []

    def click(
        self,
        frame: int,
        object_id: int,
        points: list[tuple[int, int]],
        labels,
        box: tuple[int, int, int, int] | None = None,
    ) -> None:
        # the reference maps pixel x to x / width of its input; the engine maps a normalized u
        # to u of it (the frontend's normalized clicks): u = x / width is the same click. A box
        # reaches the engine as our API sends it, two points labelled 2 and 3 before the clicks,
        # and the reference as its `box=`, which it puts there itself: that order is compared
        corners = [] if box is None else [box[:2], box[2:]]
        span = (self.frames.width, self.frames.height)
        self.ours.add_points(
            frame_index=frame,
            object_id=object_id,
            points=[[x / span[0], y / span[1]] for x, y in [*corners, *points]],
            labels=[2, 3][: len(corners)] + list(labels),
        )
        prompt = {}
        if points:  # a box alone goes without points, the reference's own box-only path
            prompt.update(points=np.array(points, np.float32), labels=np.array(labels, np.int32))
        if box is not None:
            prompt.update(box=np.array(box, np.float32))
        _, ids, logits = self.predictor.add_new_points_or_box(
            self.theirs, frame_idx=frame, obj_id=object_id, **prompt
        )
        kind = "click" if box is None else "box" if not points else "box+click"
        self.compare(f"{kind} f{frame} o{object_id}", frame, ids, logits)

    def add_mask(self, frame: int, object_id: int, mask: np.ndarray) -> None:
        self.ours.add_mask(frame_index=frame, object_id=object_id, mask=mask)
        _, ids, logits = self.predictor.add_new_mask(
            self.theirs, frame_idx=frame, obj_id=object_id, mask=mask
        )
        self.compare(f"mask f{frame} o{object_id}", frame, ids, logits)

    def propagate(self, start: int, reverse: bool, count: int, name: str) -> None:
        theirs = self.predictor.propagate_in_video(
            self.theirs, start_frame_idx=start, reverse=reverse, max_frame_num_to_track=count - 1
        )
        # one direction only, as the reference's pass does (the engine's public propagate
        # goes forward, then backward)
        self.ours._start_pass(start)
        for their_frame, ids, logits in theirs:
            self.ours._track(their_frame, reverse=reverse)
            self.compare(f"{name} f{their_frame}", their_frame, ids, logits)

    def compare(self, name: str, frame: int, ids, logits: torch.Tensor) -> None:
        ours = self.ours.tracker.logits(frame)
        for index, object_id in enumerate(ids):
            if ours[object_id] is None:  # no result there yet (the reference fills in -1024)
                continue
            low = ours[object_id].float()
            mine = F.interpolate(
                low.to(logits.device), logits.shape[-2:], mode="bilinear", align_corners=False
            )[0, 0]
            reference = logits[index, 0].float()
            self.compared.append({"name": f"{name} o{object_id}", "ours": mine, "ref": reference})


def scenario_one_object(pair: Pair, frames: DrawnFrames, count: int) -> None:
    pair.click(0, 1, [frames.centre(0, 0)], [1])
    pair.propagate(0, False, count, "forward")


def tracked_then_corrected(pair: Pair, frames: DrawnFrames, count: int) -> None:
    """Forward from frame 0, backward from frame 3, a correction click (two points) for object
    1 on tracked frame 5, then forward again."""
    pair.propagate(0, False, count, "forward")
    pair.propagate(3, True, 4, "backward")
    x, y = frames.centre(5, 0)
    pair.click(5, 1, [frames.centre(5, 0), (x + frames.radius // 2, y)], [1, 0])
    pair.propagate(0, False, count, "after correction")


def scenario_two_frames(pair: Pair, frames: DrawnFrames, count: int) -> None:
    pair.click(0, 1, [frames.centre(0, 0)], [1])
    pair.click(3, 2, [frames.centre(3, 1)], [1])
    tracked_then_corrected(pair, frames, count)


def scenario_correction(pair: Pair, frames: DrawnFrames, count: int) -> None:
    pair.click(0, 1, [frames.centre(0, 0)], [1])
    tracked_then_corrected(pair, frames, count)


def scenario_mask(pair: Pair, frames: DrawnFrames, count: int) -> None:
    pair.add_mask(0, 1, frames.disc_mask(0, 0))
    pair.click(0, 2, [frames.centre(0, 2)], [1])
    pair.propagate(0, False, count, "after a mask")
    pair.click(2, 1, [frames.centre(2, 0)], [1])  # a click on a frame given a mask's result
    pair.propagate(0, False, count, "after a click")


def scenario_batch(pair: Pair, frames: DrawnFrames, count: int) -> None:
    pair.click(0, 1, [frames.centre(0, 0)], [1])
    pair.click(0, 2, [frames.centre(0, 2)], [1])
    pair.propagate(0, False, count, "batch")


def scenario_box(pair: Pair, frames: DrawnFrames, count: int) -> None:
    """A box alone around disc 0, then the same box with a click inside it (a new prompt on
    that frame: the box's mask is the mask prompt), a forward pass, then a box on a tracked
    frame (a correction: the tracked mask is the mask prompt) and a forward pass again."""

    def around(frame: int) -> tuple[int, int, int, int]:
        (x, y), reach = frames.centre(frame, 0), frames.radius + 8
        return (x - reach, y - reach, x + reach, y + reach)

    pair.click(0, 1, [], [], box=around(0))
    x, y = frames.centre(0, 0)
    pair.click(0, 1, [(x - frames.radius // 2, y)], [1], box=around(0))
    pair.propagate(0, False, count, "after a box")
    tracked = min(3, count - 1)  # within the pass, whatever --frames is
    pair.click(tracked, 1, [], [], box=around(tracked))
    pair.propagate(0, False, count, "after a box on a tracked frame")


def summary(compared: list[dict], margin: float) -> dict:
    largest, clear, agree, total, total_agree = 0.0, 0, 0, 0, 0
    rows = []
    for item in compared:
        ours, ref = item["ours"], item["ref"]
        difference = (ours - ref).abs().max().item()
        confident = ref.abs() >= margin
        same = (ours > 0) == (ref > 0)
        rows.append(
            {
                "name": item["name"],
                "max_abs_diff": difference,
                "ref_abs_max": ref.abs().max().item(),
                "clear_pixels": int(confident.sum()),
                "clear_agree": int((same & confident).sum()),
                "all_agree": float(same.float().mean()),
            }
        )
        largest = max(largest, difference)
        clear += int(confident.sum())
        agree += int((same & confident).sum())
        total += same.numel()
        total_agree += int(same.sum())
    return {
        "outputs": len(compared),
        "max_abs_diff": largest,
        "clear_sign_agreement": agree / clear if clear else None,
        "clear_pixels": clear,
        "clear_disagreeing": clear - agree,
        "sign_agreement_all_pixels": total_agree / total,
        "rows": rows,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--precision", default="bfloat16", choices=["bfloat16", "float32"])
    parser.add_argument(
        "--ours", default="", help="our precision (auto, float32, bfloat16); default: --precision"
    )
    parser.add_argument("--version", default="2.1", choices=list(CONFIGS))
    parser.add_argument("--size", default="tiny", choices=list(SIZES))
    parser.add_argument("--frames", type=int, default=8)
    parser.add_argument("--margin", type=float, default=1.0)
    parser.add_argument("--scenarios", default="")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()

    device = torch.device(args.device)
    low = args.precision == "bfloat16"
    torch.backends.cuda.matmul.allow_tf32 = low
    torch.backends.cudnn.allow_tf32 = low
    frames = DrawnFrames(max(args.frames, 8), WIDTH, HEIGHT, 24.0)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "official.pt"
        checkpoint = random_official_checkpoint(args.version, path, args.size)
        predictor = official_predictor(args.version, device, checkpoint, args.size)
        options = Sam2Options(
            checkpoint=str(checkpoint),
            device=args.device,
            fill_hole_area=0,
            precision=args.ours or args.precision,
        )
        engine = Sam2Engine(options)
    if not low:
        float_memories(predictor)
        torch.backends.cuda.matmul.allow_tf32 = False  # the engine turns it on for CUDA
        torch.backends.cudnn.allow_tf32 = False
    images = model_inputs(frames, device, predictor.image_size)
    compared: list[dict] = []
    autocast = torch.autocast(device.type, dtype=torch.bfloat16, enabled=low)
    with autocast:
        chosen = {
            "one": scenario_one_object,
            "two": scenario_two_frames,
            "correction": scenario_correction,
            "batch": scenario_batch,
            "mask": scenario_mask,
            "box": scenario_box,
        }
        names = args.scenarios or DEFAULT_SCENARIOS[args.version == "edgetam"]
        for run in [chosen[name] for name in names.split(",")]:
            pair = Pair(engine, predictor, images, frames)
            run(pair, frames, args.frames)
            compared += pair.compared
            pair.ours.close()
    result = summary(compared, args.margin)
    result.update(
        precision=args.precision,
        ours=engine.describe(),
        version=args.version,
        size="edgetam" if args.version == "edgetam" else args.size,
        device=torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
        torch=torch.__version__,
        margin=args.margin,
    )
    for row in result["rows"]:
        print(json.dumps(row))
    print(json.dumps({k: v for k, v in result.items() if k != "rows"}))
    if args.json:
        with args.json.open("a") as out:
            out.write(json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
