"""The streaming package knows nothing about Django: each of its modules imports in a fresh
interpreter without Django being loaded, so the hub can run, and be measured, on its own."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import channels_admin.streaming

PACKAGE = Path(channels_admin.streaming.__file__).parent
ROOT = PACKAGE.parent.parent

PROBE = """
import importlib, json, sys
loaded = {}
for name in sys.argv[1:]:
    importlib.import_module(name)
    loaded[name] = sorted(m for m in sys.modules if m == "django" or m.startswith("django."))
print(json.dumps(loaded))
"""


def test_no_streaming_module_loads_django():
    names = sorted(f"channels_admin.streaming.{path.stem}" for path in PACKAGE.glob("[!_]*.py"))

    probe = subprocess.run(
        [sys.executable, "-c", PROBE, *names],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        env={"PATH": "/usr/bin:/bin"},
    )

    assert names == [
        "channels_admin.streaming.admission",
        "channels_admin.streaming.audio_watch",
        "channels_admin.streaming.decode_pool",
        "channels_admin.streaming.encoder_slots",
        "channels_admin.streaming.failover",
        "channels_admin.streaming.failure_reasons",
        "channels_admin.streaming.gop_cache",
        "channels_admin.streaming.hls_input",
        "channels_admin.streaming.hls_output",
        "channels_admin.streaming.hub",
        "channels_admin.streaming.hub_events",
        "channels_admin.streaming.key_frame_gate",
        "channels_admin.streaming.link_audience",
        "channels_admin.streaming.pace",
        "channels_admin.streaming.pattern_encoder",
        "channels_admin.streaming.picture_watch",
        "channels_admin.streaming.relay",
        "channels_admin.streaming.remux",
        "channels_admin.streaming.restamp",
        "channels_admin.streaming.segment_signature",
        "channels_admin.streaming.shared_audience",
        "channels_admin.streaming.slate",
        "channels_admin.streaming.sources",
        "channels_admin.streaming.stream_format",
        "channels_admin.streaming.subscription",
        "channels_admin.streaming.ts",
        "channels_admin.streaming.ts_scan",
        "channels_admin.streaming.upstream_addresses",
        "channels_admin.streaming.upstream_reader",
    ]
    assert json.loads(probe.stdout) == {name: [] for name in names}
