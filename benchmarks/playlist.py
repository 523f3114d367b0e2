"""Playlist benchmark: parse + load of a generated 100,000-entry playlist, channel search, and
finding a channel's sources (the entries that share its tvg-id).

    .venv/bin/python benchmarks/playlist.py [--entries 100000] [--runs 5] [--queries 200]

Prints medians. Targets: load <= 2 s; search p50 <= 50 ms (both on the 2-core machine).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from django_setup import django_start

GROUPS = [f"Group {n}" for n in range(40)]
SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "ta", "vo", "si", "de", "ba", "ge", "hu", "ja"]
SYLLABLES += ["ko", "li", "ma", "no", "pe", "ra", "su", "ti", "zu", "ße", "ön"]
QUALITY = ["", " HD", " (720p)", " (1080p)", " [Geo-blocked]"]


def channel_names(entries: int, rng: random.Random) -> list[str]:
    """Names like a large real playlist's: a few words from a vocabulary of ~5,000."""
    vocabulary = sorted(
        {"".join(rng.choices(SYLLABLES, k=rng.randint(2, 4))).capitalize() for _ in range(6000)}
    )
    return [
        " ".join(rng.choices(vocabulary, k=rng.randint(1, 3))) + rng.choice(QUALITY)
        for _ in range(entries)
    ]


def search_queries(names: list[str], count: int, rng: random.Random) -> list[str]:
    """What people type: 3 to 8 letters of a channel's name, in any case."""
    queries = []
    for _ in range(count):
        name = rng.choice(names)
        size = rng.randint(3, min(8, len(name)))
        start = rng.randrange(len(name) - size + 1)
        queries.append(rng.choice([str.lower, str.upper, str])(name[start : start + size]))
    return queries


def playlist_text(entries: int, seed: int = 7) -> str:
    rng = random.Random(seed)
    lines = ['#EXTM3U url-tvg="http://epg.example/guide.xml"']
    tvg_id = ""
    for n, name in enumerate(channel_names(entries, rng)):
        # Mostly unique IDs; every 10th a second stream of the previous channel; some without.
        if n % 10 != 9:
            tvg_id = "" if n % 10 == 5 else f"{name.split(' ')[0]}{n}.de"
        lines.append(
            f'#EXTINF:-1 tvg-id="{tvg_id}" tvg-name="{name}" tvg-logo="http://logo.example/{n}.png"'
            f' group-title="{rng.choice(GROUPS)}" tvg-chno="{n + 1}",{name} (1080p)'
        )
        lines.append(f"http://streams.example:8080/live/user/pass/{n}.ts")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    var_dir = django_start()

    from django.conf import settings

    from channels_admin.m3u import m3u_parse
    from channels_admin.models import Channel
    from channels_admin.selectors import channel_sources, channels_search
    from channels_admin.services.playlists import playlist_reload

    path = var_dir / "bench.m3u"
    path.write_text(playlist_text(args.entries), encoding="utf-8")
    settings.CHANNELS_PLAYLIST_PATH = str(path)
    settings.CHANNELS_DEMO = False  # the generated entries only
    content = path.read_bytes()

    parse_times, load_times, reload_times = [], [], []
    for _ in range(args.runs):
        started = time.perf_counter()
        parsed = m3u_parse(content)
        parse_times.append(time.perf_counter() - started)
        Channel.objects.all().delete()
        started = time.perf_counter()
        result = playlist_reload()  # into an empty list: the first load
        load_times.append(time.perf_counter() - started)
        started = time.perf_counter()
        playlist_reload()  # replacing 100,000 channels with 100,000
        reload_times.append(time.perf_counter() - started)
    if not len(parsed.entries) == result.channels == args.entries:
        raise SystemExit(f"expected {args.entries} channels, loaded {result.channels}")

    queries = search_queries([e.title for e in parsed.entries], args.queries, random.Random(11))
    search_times, found = [], []
    for query in queries:
        started = time.perf_counter()
        found.append(len(channels_search(search=query)))
        search_times.append(time.perf_counter() - started)
    group_started = time.perf_counter()
    in_group = len(channels_search(group="group 7"))
    group_time = time.perf_counter() - group_started

    picked = random.Random(13).sample(range(args.entries), min(args.queries, args.entries))
    source_times, source_counts = [], []
    for channel in Channel.objects.filter(position__in=picked):
        started = time.perf_counter()
        source_counts.append(len(channel_sources(channel=channel)))
        source_times.append(time.perf_counter() - started)

    ms = [t * 1000 for t in sorted(search_times)]
    print(f"entries: {args.entries}, database: {settings.DATABASES['default']['ENGINE']}")
    print(f"parse only:            median {statistics.median(parse_times):.3f} s")
    print(
        f"first load (parse + insert): median {statistics.median(load_times):.3f} s (target <= 2 s)"
    )
    print(f"reload (parse + replace):    median {statistics.median(reload_times):.3f} s")
    print(
        f"search ({len(queries)} queries): p50 {statistics.median(ms):.1f} ms, "
        f"p90 {ms[int(len(ms) * 0.9)]:.1f} ms, max {ms[-1]:.1f} ms (target p50 <= 50 ms); "
        f"median hits {statistics.median(found):.0f}"
    )
    broad_started = time.perf_counter()
    broad = len(channels_search(search="ka"))
    broad_time = time.perf_counter() - broad_started
    print(f"group filter 'group 7': {group_time * 1000:.1f} ms for {in_group} channels")
    print(f"broad search 'ka': {broad_time * 1000:.1f} ms for {broad} channels")
    source_ms = sorted(t * 1000 for t in source_times)
    print(
        f"sources of a channel ({len(source_ms)} channels): p50 "
        f"{statistics.median(source_ms):.2f} ms, max {source_ms[-1]:.2f} ms; "
        f"{source_counts.count(2)} of them with a second stream"
    )


if __name__ == "__main__":
    main()
