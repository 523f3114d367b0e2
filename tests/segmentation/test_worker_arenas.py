"""The inference worker allocates from one malloc arena, as the server does (core/malloc.py,
issue 47): set at its start, before its engine is loaded or its threads run, so that the memory
its sessions' threads free goes back with ``malloc_trim``.

glibc's ``malloc_info`` lists the arenas (a ``<heap>`` each). A thread that allocates for the
first time gets an arena of its own, where nothing limits them: the worker's start (the command,
its engine loaded, with its serving replaced by the count) is run in a process of its own, and a
thread that allocates there still finds the one arena.
"""

from __future__ import annotations

import platform
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, project_env

pytestmark = pytest.mark.skipif(
    platform.libc_ver()[0] != "glibc", reason="arenas are glibc's allocator's"
)

ARENAS = """
import ctypes, ctypes.util, tempfile, threading

def arenas() -> int:
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    libc.fopen.restype = ctypes.c_void_p
    libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    libc.fclose.argtypes = [ctypes.c_void_p]
    with tempfile.NamedTemporaryFile() as info:
        stream = libc.fopen(info.name.encode(), b"w")
        libc.malloc_info(0, stream)
        libc.fclose(stream)
        return open(info.name).read().count("<heap nr=")

def arenas_after_a_thread() -> int:
    thread = threading.Thread(target=bytes, args=(100_000,))  # its first allocation
    thread.start()
    thread.join()
    return arenas()
"""

WORKER_STARTED = (
    ARENAS
    + """
import django
from django.core.management import call_command

django.setup()
from segmentation.management.commands.segmentation_worker import Command

async def serve(self, info) -> None:
    print("serving", info.engine, "arenas", arenas_after_a_thread())

Command._serve = serve
call_command("segmentation_worker", name="arenas")
"""
)

NOTHING_LIMITED = ARENAS + 'print("arenas", arenas_after_a_thread())'


def run(script: str, var: Path) -> str:
    env = project_env(var, REDIS_URL="redis://127.0.0.1:1/0")  # never reached: serving replaced
    env.pop("MALLOC_ARENA_MAX", None)
    done = subprocess.run(
        [sys.executable, "-c", script],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_the_worker_allocates_from_one_arena_whatever_its_threads(tmp_path: Path):
    # given: where nothing limits them, a thread's first allocation makes it an arena
    assert run(NOTHING_LIMITED, tmp_path) == "arenas 2"

    # when: the worker has started (its engine loaded), and a thread allocates
    started = run(WORKER_STARTED, tmp_path)

    # then: still the one arena
    engine = started.split()[1]
    assert started == f"serving {engine} arenas 1"
