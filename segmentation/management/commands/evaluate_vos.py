"""``manage.py evaluate_vos DIR [DIR ...]``: J&F of an engine on DAVIS-layout sequences.

Each DIR is a sequence folder (``JPEGImages/``, ``Annotations/``) or a folder of them. The
simulated user and the measures are described in :mod:`segmentation.evaluation.runner`.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from segmentation.engines import EngineConfigError, engine_create
from segmentation.evaluation.corrections import (
    Corrections,
    corrections_mean,
    corrections_sequence,
)
from segmentation.evaluation.davis import Sequence, SequenceError
from segmentation.evaluation.dev_halves import halves_means
from segmentation.evaluation.runner import (
    Interactive,
    Score,
    evaluate_sequence,
    interactive_mean,
    interactive_sequence,
    score_mean,
)
from segmentation.services.process_engine import engine_chosen

PROTOCOLS = ("clicks", "first-mask", "corrections")


class Command(BaseCommand):
    help = "Measure a segmentation engine (J, F, speed) on DAVIS-layout sequences."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dirs", nargs="+", type=Path, help="sequence folders, or their parent")
        parser.add_argument("--engine", default=None, help="engine name (default: the setting)")
        parser.add_argument(
            "--option",
            action="append",
            default=[],
            metavar="KEY=VALUE",
            help="an engine option; repeat for several",
        )
        parser.add_argument(
            "--clicks", default="3", help="comma-separated click counts to measure (default: 3)"
        )
        parser.add_argument(
            "--protocol",
            choices=PROTOCOLS,
            default="clicks",
            help="clicks: the simulated user clicks on the first frame (default); first-mask: "
            "each object's true mask is given there (DAVIS 2016's semi-supervised protocol); "
            "corrections: a first click and a propagation, then rounds of one click on each "
            "object's worst frame and a propagation from there",
        )
        parser.add_argument(
            "--rounds",
            type=int,
            default=8,
            help="rounds of the corrections protocol, the first included (default: 8)",
        )
        parser.add_argument(
            "--interactive",
            type=int,
            default=0,
            metavar="CLICKS",
            help="also measure the clicked frame alone: J after each of CLICKS rounds of clicks, "
            "NoC@85 and NoC@90 (20 is the standard; default: 0, not measured)",
        )
        parser.add_argument("--json", type=Path, help="write the figures to this JSON file")
        parser.add_argument("--dump-masks", type=Path, help="write the masks here as PNGs")

    def handle(self, *args: object, **options: object) -> None:
        name = options["engine"] or engine_chosen().engine
        raw_options = _key_values(options["option"])
        if name == "sam2":  # checkpoint=base_plus: the official file in the models folder
            raw_options.setdefault("models_dir", str(settings.SAM2_MODELS_DIR))
        try:
            engine = engine_create(name, raw_options)
        except (EngineConfigError, FileNotFoundError) as error:
            raise CommandError(f"engine {name!r}: {error}") from None
        click_counts = _click_counts(options["clicks"])
        if not 0 <= options["interactive"] <= 100:
            raise CommandError(f"--interactive takes 0..100 clicks, got {options['interactive']}")
        if not 1 <= options["rounds"] <= 100:
            raise CommandError(f"--rounds takes 1..100 rounds, got {options['rounds']}")
        sequences = _sequences(options["dirs"])
        if options["protocol"] == "corrections":
            self._corrections(name, engine, sequences, options)
            return
        first_mask = options["protocol"] == "first-mask"
        rounds = [0] if first_mask else click_counts
        total = sum(len(s.annotation_paths) for s in sequences) * len(rounds)
        progress = _ProgressBar(total, sys.stderr)
        results: dict[str, dict[str, object]] = {}
        for clicks in rounds:
            scores: dict[str, Score] = {}
            for sequence in sequences:
                what = "first mask" if first_mask else f"{clicks} click{'s' * (clicks != 1)}"
                progress.begin(f"{sequence.name}, {what}")
                dump = options["dump_masks"]
                where = "first-mask" if first_mask else str(clicks)
                scores[sequence.name] = evaluate_sequence(
                    engine,
                    sequence,
                    clicks=clicks,
                    progress=progress.advance,
                    dump_dir=dump / where / sequence.name if dump else None,
                    first_mask=first_mask,
                )
            results[where] = {
                "sequences": {n: score.as_dict() for n, score in scores.items()},
                "mean": score_mean(list(scores.values())).as_dict(),
                **_halves(scores, lambda found: score_mean(found).as_dict()),
            }
        progress.close()
        self._report(name, results)
        if first_mask:
            figures: dict[str, object] = {"protocol": "first-mask", **results}
        else:
            figures = {"protocol": "clicks", "clicks": results}
        if options["interactive"]:
            figures["interactive"] = self._interactive(engine, sequences, options["interactive"])
        self._write(options["json"], figures)

    def _write(self, path: Path | None, figures: dict[str, object]) -> None:
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps(figures, indent=2) + "\n")
            self.stdout.write(f"wrote {path}")

    def _corrections(self, name: str, engine, sequences: list[Sequence], options: dict) -> None:
        rounds = options["rounds"]
        # at most: a round skips an object whose every frame is exact
        total = sum(
            len(s.annotation_paths) * (1 + (rounds - 1) * len(s.object_ids())) for s in sequences
        )
        progress = _ProgressBar(total, sys.stderr)
        found: dict[str, Corrections] = {}
        for sequence in sequences:
            progress.begin(f"{sequence.name}, {rounds} rounds of corrections")
            found[sequence.name] = corrections_sequence(
                engine, sequence, rounds=rounds, progress=progress.advance
            )
        progress.close()
        per_sequence = {n: result.as_dict() for n, result in found.items()}
        summary = {
            "mean": corrections_mean(list(found.values())),
            **_halves(found, corrections_mean),
        }
        self.stdout.write(f"engine {name}")
        self.stdout.write(
            f"{'sequence':24} {'to 0.80':>7} {'slowest fps':>11}  J&F after each round"
        )
        for sequence, result in [*per_sequence.items(), *_summary_rows(summary)]:
            after = " ".join(f"{jf:.3f}" for jf in result["JF_per_round"])
            self.stdout.write(
                f"{sequence:24} {result['rounds_to_80']:>7} {result['slowest_fps']:11.1f}  {after}"
            )
        figures = {
            "protocol": "corrections",
            "corrections": {"rounds": rounds, "sequences": per_sequence, **summary},
        }
        self._write(options["json"], figures)

    def _interactive(self, engine, sequences: list[Sequence], max_clicks: int) -> dict:
        found: dict[str, Interactive] = {}
        for sequence in sequences:
            found[sequence.name] = interactive_sequence(engine, sequence, max_clicks=max_clicks)
        per_sequence = {n: result.as_dict() for n, result in found.items()}
        summary = {"mean": interactive_mean(list(found.values()))}
        summary.update(_halves(found, interactive_mean))
        self.stdout.write(f"{'sequence':24} {'NoC@85':>6} {'NoC@90':>6}  J after 1, 3, 5 clicks")
        for sequence, result in [*per_sequence.items(), *_summary_rows(summary)]:
            after = ", ".join(f"{j:.3f}" for j in result["J_per_click"][0:5:2])
            self.stdout.write(f"{sequence:24} {result['NoC85']:>6} {result['NoC90']:>6}  {after}")
        return {"max_clicks": max_clicks, "sequences": per_sequence, **summary}

    def _report(self, engine: str, results: dict[str, dict[str, object]]) -> None:
        self.stdout.write(f"engine {engine}")
        header = (
            f"{'sequence':24} {'clicks':>6} {'J':>6} {'F':>6} {'J&F':>6} {'fps':>7} {'click ms':>9}"
        )
        self.stdout.write(header)
        for clicks, result in results.items():
            for sequence, score in [*result["sequences"].items(), *_summary_rows(result)]:
                self.stdout.write(
                    f"{sequence:24} {clicks:>6} {score['J']:6.3f} {score['F']:6.3f} "
                    f"{score['JF']:6.3f} {score['fps']:7.1f} {score['click_ms']:9.1f}"
                )


def _halves(found: dict, mean) -> dict[str, object]:
    """``{"halves": {"A": ..., "B": ...}}`` when ``found`` covers the development set's two
    halves (segmentation.evaluation.dev_halves), else nothing."""
    halves = halves_means(found, mean)
    return {"halves": halves} if halves else {}


def _summary_rows(summary: dict) -> list[tuple[str, dict]]:
    """The table's rows under the sequences: the mean, then each half's where measured."""
    halves = summary.get("halves", {})
    return [("mean", summary["mean"]), *((f"half {h}", r) for h, r in halves.items())]


def _key_values(items: list[str]) -> dict[str, str]:
    options = {}
    for item in items:
        key, separator, value = item.partition("=")
        if not separator or not key:
            raise CommandError(f"--option takes KEY=VALUE, got {item!r}")
        options[key] = value
    return options


def _click_counts(text: str) -> list[int]:
    try:
        counts = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        counts = []
    if not counts or any(count < 1 for count in counts):
        raise CommandError(f"--clicks takes positive integers separated by commas, got {text!r}")
    return sorted(set(counts))


def _sequences(folders: list[Path]) -> list[Sequence]:
    sequences = []
    for folder in folders:
        if not folder.is_dir():
            raise CommandError(f"{folder} is not a folder")
        candidates = [folder] if (folder / "JPEGImages").is_dir() else sorted(folder.iterdir())
        found = [c for c in candidates if (c / "JPEGImages").is_dir()]
        if not found:
            raise CommandError(
                f"{folder} holds no DAVIS-layout sequence (JPEGImages/, Annotations/)"
            )
        for candidate in found:
            try:
                sequences.append(Sequence.load(candidate))
            except SequenceError as error:
                raise CommandError(str(error)) from None
    return sequences


class _ProgressBar:
    """``[#####.....] 120/400 frames  blackswan, 3 clicks`` on one line of a stream."""

    WIDTH = 30

    def __init__(self, total: int, stream) -> None:
        self.total, self.done, self.label = total, 0, ""
        self._stream = stream
        self._shown = 0.0

    def begin(self, label: str) -> None:
        self.label = label
        if not self._stream.isatty():  # a log gets one line per sequence, not a redraw
            self._stream.write(f"{self.done}/{self.total} frames  {label}\n")
            self._stream.flush()

    def advance(self, frames: int) -> None:
        self.done += frames
        if not self._stream.isatty():
            return
        now = time.monotonic()
        if now - self._shown >= 0.1 or self.done == self.total:
            self._shown = now
            filled = self.WIDTH * self.done // max(self.total, 1)
            bar = "#" * filled + "." * (self.WIDTH - filled)
            self._stream.write(f"\r[{bar}] {self.done}/{self.total} frames  {self.label:40}")
            self._stream.flush()

    def close(self) -> None:
        if self._stream.isatty():
            self._stream.write("\n")
        self._stream.flush()
