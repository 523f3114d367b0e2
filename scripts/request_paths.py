"""Which of the project's files a segmentation request runs through, measured by tracing it.

    .venv/bin/python scripts/request_paths.py

Runs the embedded server's Django application in this process on a throwaway folder (the
classic engine, the default video), makes each request once untraced (imports and caches
settle) and once traced, and prints the project files whose functions ran: for a click
(``addPoints``), a propagation (``POST /propagate_in_video``, read to its end) and a cancel
(``cancelPropagateInVideo``). The files an empty GraphQL request runs through (the endpoint and
its middleware, the same for every request) and the engine's own files are left out.
docs/architecture.md quotes its output.
"""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
os.environ.update(
    VAR_DIR=tempfile.mkdtemp(prefix="request-paths-"),
    DJANGO_SETTINGS_MODULE="config.settings",
    SEGMENTATION_ENGINE="classic",
    ALLOWED_HOSTS="testserver",
)

import django  # noqa: E402

django.setup()

from django.core.management import call_command  # noqa: E402
from django.test import AsyncClient, Client  # noqa: E402

ENGINES = "segmentation/engines/"


def traced(request: Callable[[], object]) -> set[str]:
    """The project files (outside .venv) whose functions ran during ``request()``, in every
    thread."""
    files: set[str] = set()

    def profile(frame, event, _arg):
        if event == "call":
            files.add(frame.f_code.co_filename)

    sys.setprofile(profile)
    threading.setprofile(profile)
    try:
        request()
    finally:
        sys.setprofile(None)
        threading.setprofile(None)
    inside = (Path(f) for f in files if f.startswith(str(ROOT)) and "/.venv/" not in f)
    return {path.relative_to(ROOT).as_posix() for path in inside}


def graphql(client: Client, query: str, **variables: object) -> dict:
    response = client.post(
        "/graphql", {"query": query, "variables": variables}, content_type="application/json"
    )
    return response.json()


START = "mutation($p: String!) { startSession(input: {path: $p}) { sessionId } }"
CLICK = """mutation($input: AddPointsInput!) {
  addPoints(input: $input) { frameIndex rleMaskList { objectId rleMask { counts size } } }
}"""
CANCEL = """mutation($input: CancelPropagateInVideoInput!) {
  cancelPropagateInVideo(input: $input) { success }
}"""


def propagate(session_id: str) -> None:
    async def read() -> None:
        response = await AsyncClient().post(
            "/propagate_in_video",
            {"session_id": session_id, "start_frame_index": 0},
            content_type="application/json",
        )
        async for _part in response.streaming_content:
            pass

    asyncio.run(read())


def main() -> None:
    call_command("migrate", verbosity=0)
    call_command("default_video", stdout=open(os.devnull, "w"))  # noqa: SIM115
    from segmentation.models import Video

    client = Client()
    session_id = graphql(client, START, p=Video.objects.get().path)["data"]["startSession"][
        "sessionId"
    ]
    click = {
        "sessionId": session_id,
        "frameIndex": 0,
        "objectId": 1,
        "labels": [1],
        "points": [[0.5, 0.5]],
        "clearOldPoints": True,
    }
    requests = {
        "a click (addPoints)": lambda: graphql(client, CLICK, input=click),
        "a propagation (POST /propagate_in_video)": lambda: propagate(session_id),
        "a cancel (cancelPropagateInVideo)": lambda: graphql(
            client, CANCEL, input={"sessionId": session_id}
        ),
    }
    endpoint = lambda: graphql(client, "{ __typename }")  # noqa: E731
    endpoint()
    common = traced(endpoint)
    for name, request in requests.items():
        request()
        files = sorted(f for f in traced(request) - common if not f.startswith(ENGINES))
        print(f"{name}: {len(files)} files")
        for file in files:
            print(f"  {file}")


if __name__ == "__main__":
    main()
