"""The schedule run by the real server, with entries a few seconds ahead and a real origin of
real MPEG-TS: a switch at its time and the return at its end, a person's switch winning until
the next entry, a restart in between (missed switches taken up or skipped, none repeated), and
two processes on Redis switching once each time, the other taking over when the one that runs
the schedule dies; and a switch that a killed server left running, ended by the next."""

from __future__ import annotations

import datetime as dt
import os
import signal
import time
import uuid

import pytest
import redis
import requests

from loopback_fakes.media_upstream import MediaUpstream
from tests.channels_admin.stream_client import select, status, wait_until
from tests.conftest import free_port, manage, migrated, project_env, running_server, server_pid
from tests.system.test_scale_out import REDIS_URL, needs_redis

SCHEDULE = "/api/admin/schedule"
LOCK_SEC = 2


@pytest.fixture(scope="module")
def origin():
    server = MediaUpstream()
    yield server
    server.close()


def env_for(origin: MediaUpstream, var_dir) -> dict[str, str]:
    playlist = var_dir / "channels.m3u"
    playlist.write_text(
        "#EXTM3U\n"
        + "".join(
            f'#EXTINF:-1 tvg-id="{key}",{key.title()}\n{origin.url(f"/{key}.ts")}\n'
            for key in ("one", "two", "solo")
        ),
        encoding="utf-8",
    )
    return {
        "CHANNELS_PLAYLIST_PATH": str(playlist),
        "CHANNELS_DEMO": "0",
        "CHANNELS_SLATE": "0",
        "CHANNELS_SCHEDULE_MISSED_SEC": "1",
    }


@pytest.fixture(scope="module")
def server(origin, tmp_path_factory):
    var_dir = tmp_path_factory.mktemp("schedule-var")
    with running_server(var_dir, **env_for(origin, var_dir)) as base_url:
        yield base_url


def in_seconds(seconds: float) -> dt.datetime:
    return dt.datetime.now(dt.UTC) + dt.timedelta(seconds=seconds)


def entry_create(server: str, **values) -> dict:
    for name in ("at", "until"):
        if isinstance(values.get(name), dt.datetime):
            values[name] = values[name].isoformat()
    response = requests.post(f"{server}{SCHEDULE}", json=values, timeout=10)
    assert response.status_code == 200, response.text
    return response.json()


def runs_of(server: str, entry: dict) -> list[dict]:
    """The entry's switches, the first first."""
    runs = requests.get(f"{server}{SCHEDULE}", timeout=10).json()["runs"]
    return [run for run in reversed(runs) if run["entry_id"] == entry["id"]]


def finished(server: str, entry: dict, count: int) -> list[dict]:
    """The entry's ``count`` switches, once recorded as done."""
    seen: list[list[dict]] = []

    def done() -> bool:
        seen.append(runs_of(server, entry))  # one read: the rows and their outcomes together
        return len(seen[-1]) == count and all(r["outcome"] != "running" for r in seen[-1])

    wait_until(done, timeout=15, what=f"{count} switches of entry {entry['id']}")
    return seen[-1]


def test_an_entry_switches_at_its_time_and_goes_back_at_its_end(server):
    select(server, "one")
    wait_until(lambda: not status(server)["transitioning"], what="One playing")
    start, end = in_seconds(2), in_seconds(5)

    entry = entry_create(
        server, kind="once", channel_id="two", at=start, until=end, then_return=True
    )

    wait_until(lambda: status(server)["channel_name"] == "Two", what="the switch to Two")
    assert status(server)["switch_message"] in {"Scheduled: switching to Two…", "Now playing Two"}
    wait_until(lambda: status(server)["channel_name"] == "One", what="the return to One")
    assert status(server)["switch_message"] in {
        f"Scheduled: {entry_label(entry)} ended; back to One…",
        "Now playing One",
    }
    first, back = finished(server, entry, 2)
    assert [(r["action"], r["outcome"], r["channel_name"]) for r in (first, back)] == [
        ("start", "switched", "Two"),
        ("return", "switched", "One"),
    ]
    assert 0 <= first["lateness"] < 1.0
    assert 0 <= back["lateness"] < 1.0


def entry_label(entry: dict) -> str:
    return entry["name"] or f"{entry['kind']} entry {entry['id']}"


def test_a_persons_switch_wins_until_the_next_entry(server):
    select(server, "one")
    wait_until(lambda: not status(server)["transitioning"], what="One playing")
    entry = entry_create(
        server,
        kind="once",
        channel_id="two",
        at=in_seconds(1.5),
        until=in_seconds(4.5),
        then_return=True,
        programme_title="The Film",
    )
    wait_until(lambda: status(server)["channel_name"] == "Two", what="the switch to Two")
    assert status(server)["switch_message"] in {
        "Scheduled (The Film): switching to Two…",
        "Now playing Two",
    }

    select(server, "solo")  # a person, during the programme
    _, back = finished(server, entry, 2)

    # the end found another switch than its own: no return, and the schedule never re-asserts
    assert (back["outcome"], back["detail"]) == (
        "unchanged",
        "the channel was changed since: it stays",
    )
    time.sleep(0.5)  # nothing is due: nothing to wait for but the absence of a switch
    assert status(server)["channel_name"] == "Solo"


def test_a_restart_takes_up_or_skips_the_missed_switches_and_repeats_none(origin, tmp_path):
    env = env_for(origin, tmp_path)
    with running_server(tmp_path, **env) as first_run:
        select(first_run, "one")
        due = in_seconds(4)
        skipped = entry_create(
            first_run, kind="once", channel_id="solo", at=due, missed="skip", name="skip me"
        )
        taken = entry_create(
            first_run,
            kind="once",
            channel_id="two",
            at=due + dt.timedelta(seconds=0.5),
            until=due + dt.timedelta(minutes=5),
            name="take me up",
        )
    # the server is down while both come due
    while dt.datetime.now(dt.UTC) < due + dt.timedelta(seconds=2):
        time.sleep(0.1)

    with running_server(tmp_path, **env) as second_run:
        (skip_run,) = finished(second_run, skipped, 1)
        (take_run,) = finished(second_run, taken, 1)
        wait_until(lambda: status(second_run)["channel_name"] == "Two", what="taken up")
    assert skip_run["outcome"] == "skipped"
    assert skip_run["detail"].endswith("s: skipped, as the entry says")
    assert take_run["outcome"] == "taken up"
    assert take_run["lateness"] > 1

    with running_server(tmp_path, **env) as third_run:  # and again: nothing is made twice
        status(third_run)
        time.sleep(1.5)  # the runner's first look is done at once; a second one comes too
        assert runs_of(third_run, skipped) == [skip_run]
        assert runs_of(third_run, taken) == [take_run]
        assert status(third_run)["channel_name"] == "Two"


# What a server killed mid-switch leaves: the row of its switch, running. The entry's time is
# an hour ago (the row is that switch's); a second row was claimed 5 s ago, as another process
# that is still making its switch would have.
LEFT_RUNNING = """
import datetime as dt
from django.utils import timezone
from channels_admin.models import ScheduleEntry, ScheduleRun
now = timezone.now()
hour_ago = now - dt.timedelta(hours=1)
entry = ScheduleEntry.objects.create(
    name="killed", channel_id="two", kind="once", at=hour_ago, edited_at=now - dt.timedelta(hours=2)
)
for at in (hour_ago, now - dt.timedelta(seconds=5)):
    ScheduleRun.objects.create(
        entry=entry, due_at=at, action="start", slot_start=at, claimed_at=at, outcome="running"
    )
print(entry.pk)
"""


def test_a_switch_left_running_by_a_killed_server_is_ended_by_the_next(origin, tmp_path):
    env = env_for(origin, tmp_path)
    migrated(project_env(tmp_path, **env))
    made = manage("shell", "-c", LEFT_RUNNING, env=project_env(tmp_path, **env))
    assert made.returncode == 0, made.stderr
    entry = {"id": int(made.stdout.split()[-1])}

    with running_server(tmp_path, **env) as server:
        wait_until(
            lambda: runs_of(server, entry)[0]["outcome"] != "running",
            what="the row left running ended",
        )
        runs = runs_of(server, entry)

    # the one claimed an hour ago (more than CHANNELS_SWITCH_TIMEOUT_SEC and a minute) is
    # ended; the one claimed 5 s ago may still be under way elsewhere, and stays
    assert [(r["outcome"], r["detail"]) for r in runs] == [
        ("failed", "interrupted: the server making it stopped before it ended"),
        ("running", ""),
    ]


@needs_redis
def test_two_processes_on_redis_make_each_switch_once_and_one_takes_over(origin, tmp_path):
    prefix = f"test-schedule-{uuid.uuid4().hex[:8]}"
    env = {
        **env_for(origin, tmp_path),
        "REDIS_URL": REDIS_URL,
        "CHANNELS_RELAY_PREFIX": prefix,
        "CHANNELS_SCHEDULE_PREFIX": prefix,
        "CHANNELS_SCHEDULE_LOCK_SEC": str(LOCK_SEC),
    }
    keys = redis.Redis.from_url(REDIS_URL)
    with (
        running_server(tmp_path, port=free_port(), log_name="one.log", **env) as one,
        running_server(tmp_path, port=free_port(), log_name="two.log", **env) as two,
    ):
        status(one), status(two)
        entries = [
            entry_create(two, kind="once", channel_id=channel, at=in_seconds(3 + index))
            for index, channel in enumerate(("two", "solo", "one"))
        ]
        runs = [finished(one, entry, 1)[0] for entry in entries]
        wait_until(lambda: status(two)["channel_name"] == "One", what="the last switch")
        logs = {server: switches_logged(tmp_path, server, one) for server in (one, two)}

        # the process that runs the schedule dies; the other takes over within the lease
        holder = int(keys.get(f"{prefix}:runner").decode().split(":")[1])
        survivor = next(server for server in (one, two) if server_pid(server) != holder)
        os.kill(holder, signal.SIGKILL)
        late = entry_create(survivor, kind="once", channel_id="two", at=in_seconds(LOCK_SEC + 2))
        (late_run,) = finished(survivor, late, 1)

    assert [(r["outcome"], r["channel_name"]) for r in runs] == [
        ("switched", "Two"),
        ("switched", "Solo"),
        ("switched", "One"),
    ]
    assert all(0 <= run["lateness"] < 1.0 for run in runs)
    assert sorted(logs.values()) == [0, 3]  # one process made all three, each once
    assert logs[survivor] == 0
    assert (late_run["outcome"], late_run["channel_name"]) == ("switched", "Two")
    assert 0 <= late_run["lateness"] < 1.0
    assert switches_logged(tmp_path, survivor, one) == 1


def switches_logged(var_dir, server: str, one: str) -> int:
    """The schedule's switches the log of ``server`` (``one`` or the other) tells of."""
    log = (var_dir / ("one.log" if server == one else "two.log")).read_text()
    return sum("schedule: " in line and ": switched to " in line for line in log.splitlines())
