"""Schemathesis against the real server's ``/graphql``: no request may get a 5xx (issue 36).

    .venv/bin/python benchmarks/graphql_fuzz.py [--max-examples 200] [--workers 2] [--seed N]
        [--max-time SECONDS] [--schema-file] [--server-env KEY=VALUE ...] [--report-dir DIR]

On its first run the script makes a throwaway virtual environment, ``benchmarks/.fuzz-venv/``
(ignored by git), and installs ``schemathesis==4.32.5`` there: the fuzzer is no part of the
project's requirements and the tests do not use it. It then runs the real server (daphne, as
``make run`` does) on a free loopback port over a fresh temporary VAR_DIR, migrated and holding
the drawn default video, and runs ``st run`` against ``http://127.0.0.1:PORT/graphql``: the
schema comes from introspection (with ``--schema-file``, from the committed ``schema.graphql``),
and every root field of ``Query`` and ``Mutation`` is one operation, fuzzed with up to
``--max-examples`` generated requests. The one check is ``http_server_error``: an answer with an
HTTP status of 500 or more. (Schemathesis's own ``not_a_server_error`` also fails every GraphQL
error in a 200, which this API answers by design, ``SESSION_NOT_FOUND`` and the like.)

So that the fuzzer gets past "no such session" to the engine, this file is also the run's
hooks file (``SCHEMATHESIS_HOOKS``). A case that names a ``sessionId`` goes in one of three
forms, drawn with it: as generated; with a session open on the server in its place; or with that
session and the frame, object, points and labels drawn where the engine takes them (a frame of
the video, object 0 to 3, 1 to 21 points in [0, 1], labels 1 or 0), so that a share of the
clicks is cut by the engine. The open session is started by the hook when a request needs it,
and replaced once it is closed, expired or out of engine budget. A ``startSession`` case goes as
generated or with the default video's path (the sessions those open are closed at once, so that
the server does not fill up). The ``Upload`` scalar is given strings (a JSON request cannot
carry a file part, so no upload gets further than GraphQL's validation) and ``GlobalID``
strings, integers, the default video's ID and other base64 ``Type:id`` texts.

At the end it prints, from the run's HAR file: the cases sent, their answers by status class
and status, the GraphQL error codes, per operation how many were answered with data and no
error, each server error (5xx) with the request that caused it, the GraphQL errors without a code
(an exception a resolver did not expect ends up so, in a 200), and how many times ``Traceback``
appears in the server's log, with the last line of each. The HAR file and the server's log stay
in ``--report-dir`` (default ``test-output/graphql-fuzz/``). It exits 1 if any answer was a
5xx, or if the server died.

The server runs with the default settings but for what ``--server-env`` sets (repeatable). With
the defaults the per-client rate limits answer mutations with 429 ``RATE_LIMITED`` once the
run's cost passes them (every case comes from one address), and too costly requests are 400
``QUERY_TOO_COMPLEX``: both are expected, and neither reaches the engine. To have the fuzzer
reach the engine, give the server a high rate limit, for example
``--server-env RATE_LIMIT_COST=0`` (0: no limit; the setting's name is the one
config/settings.py reads at the time).
"""

from __future__ import annotations

import argparse
import base64
import collections
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.local_server import served  # noqa: E402

SCHEMATHESIS = "schemathesis==4.32.5"
FUZZ_VENV = ROOT / "benchmarks" / ".fuzz-venv"
CHECK = "http_server_error"
# What the script tells the hooks, in the schemathesis process's environment.
URL_VAR = "GRAPHQL_FUZZ_URL"
VIDEO_VAR = "GRAPHQL_FUZZ_VIDEO"  # the default video's id, path and frameCount, as JSON
# Put in a generated case where the live session's ID goes; never generated itself (hypothesis
# draws no such prefix at this rate, and the hook replaces every one before the request goes).
LIVE_SESSION = "graphql-fuzz:live-session"
SESSION_ID_VALUE = re.compile(r'(sessionId:\s*)"(?:[^"\\]|\\.)*"')
PATH_VALUE = re.compile(r'(path:\s*)"(?:[^"\\]|\\.)*"')
FRAME_VALUE = re.compile(r"(frameIndex:\s*)-?\d+")
OBJECT_VALUE = re.compile(r"(objectId:\s*)-?\d+")
POINTS_VALUE = re.compile(r"(points:\s*)\[(?:[^\[\]]|\[[^\[\]]*\])*\]")
LABELS_VALUE = re.compile(r"(labels:\s*)\[[^\[\]]*\]")
# Points of a well-formed click: 21 are the most GRAPHQL_MAX_COST (100) admits.
MAX_POINTS = 21
ROOT_FIELD = re.compile(r"^\s*(?:(mutation|query)\b[^{]*)?\{\s*(\w+)")
SHOWN_CHARS = 600


# --- the fuzzer's environment --------------------------------------------------------------------


def fuzz_venv() -> Path:
    """The throwaway environment's ``st``, made and filled on first use (again when the pin
    changes)."""
    marker = FUZZ_VENV / "installed.txt"
    if marker.exists() and marker.read_text().strip() == SCHEMATHESIS:
        return FUZZ_VENV / "bin" / "st"
    print(f"installing {SCHEMATHESIS} into {FUZZ_VENV.relative_to(ROOT)}/", flush=True)
    shutil.rmtree(FUZZ_VENV, ignore_errors=True)
    subprocess.run([sys.executable, "-m", "venv", str(FUZZ_VENV)], check=True)  # noqa: S603
    pip = [str(FUZZ_VENV / "bin" / "python"), "-m", "pip", "install", "--quiet"]
    subprocess.run([*pip, SCHEMATHESIS], check=True)  # noqa: S603 (pinned, into the throwaway venv)
    marker.write_text(SCHEMATHESIS + "\n")
    return FUZZ_VENV / "bin" / "st"


# --- the hooks, run inside schemathesis (loaded from this file by SCHEMATHESIS_HOOKS) -------------


def graphql_post(url: str, query: str) -> dict:
    request = urllib.request.Request(  # noqa: S310 (the loopback server's own URL)
        url, data=json.dumps({"query": query}).encode(), method="POST"
    )
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=120) as response:  # noqa: S310
            return json.loads(response.read())
    except (OSError, ValueError):  # a refusal (429, 400) or an answer that is not JSON
        return {}


class LiveSessions:
    """The session the marked cases act on: started on first need, replaced once it is gone;
    shared by schemathesis's workers."""

    def __init__(self, url: str, video_path: str) -> None:
        self.url = url
        self.video_path = video_path
        self.current: str | None = None
        self.guard = threading.Lock()

    def get(self) -> str | None:
        with self.guard:
            if self.current is None:
                self.current = self.start(self.video_path)
            return self.current

    def start(self, path: str) -> str | None:
        answer = graphql_post(
            self.url,
            f"mutation {{ startSession(input: {{path: {json.dumps(path)}}}) {{ sessionId }} }}",
        )
        return ((answer.get("data") or {}).get("startSession") or {}).get("sessionId")

    def close(self, session_id: str) -> None:
        graphql_post(
            self.url,
            f"mutation {{ closeSession(input: {{sessionId: {json.dumps(session_id)}}}) "
            "{ success } }",
        )

    def drop(self, session_id: str) -> None:
        """The session is no use any more (closed, expired, its engine budget spent)."""
        with self.guard:
            if self.current != session_id:
                return
            self.current = None
        self.close(session_id)


def install_hooks() -> None:
    """Register the scalars' strategies, the check and the hooks with schemathesis."""
    import schemathesis
    from hypothesis import strategies as st
    from schemathesis.graphql import nodes

    url = os.environ[URL_VAR]
    video = json.loads(os.environ[VIDEO_VAR])
    sessions = LiveSessions(url, video["path"])

    schemathesis.graphql.scalar("Upload", st.text().map(nodes.String))
    typed_ids = st.tuples(
        st.sampled_from(["Video", "SharedVideo", "Session"]) | st.text(),
        st.integers().map(str) | st.text(),
    ).map(lambda parts: base64.b64encode(":".join(parts).encode("utf-8", "replace")).decode())
    global_ids = st.just(video["id"]) | typed_ids | st.text()
    schemathesis.graphql.scalar(
        "GlobalID", global_ids.map(nodes.String) | st.integers().map(nodes.Int)
    )

    point = st.tuples(st.floats(0, 1), st.floats(0, 1))
    prompts = st.integers(1, MAX_POINTS).flatmap(
        lambda n: st.tuples(
            st.lists(point, min_size=n, max_size=n),
            st.lists(st.sampled_from((1, 0)), min_size=n, max_size=n),
        )
    )
    # where the engine takes them: a frame of the video, one of a few objects, a prompt in range
    clicks = st.tuples(st.integers(0, video["frameCount"] - 1), st.integers(0, 3), prompts)

    @schemathesis.check
    def http_server_error(ctx, response, case) -> None:
        if response.status_code >= 500:
            raise AssertionError(f"server error: HTTP {response.status_code}")

    @schemathesis.hook
    def flatmap_case(context, case):
        body = case.body
        if not isinstance(body, str):
            return st.just(case)
        if SESSION_ID_VALUE.search(body):
            marked = SESSION_ID_VALUE.sub(rf'\1"{LIVE_SESSION}"', body)
            tamed = clicks.map(lambda drawn: in_range(marked, *drawn))
        elif root_field(body) == "startSession":
            marked = PATH_VALUE.sub(lambda m: m.group(1) + json.dumps(video["path"]), body)
            tamed = st.nothing()
        else:
            return st.just(case)
        # the live session first: shrinking goes towards the cases that reach the engine
        texts = tamed | st.just(marked) | st.just(body)
        return texts.map(lambda text: with_body(case, text))

    @schemathesis.hook
    def before_call(context, case, kwargs) -> None:
        if isinstance(case.body, str) and LIVE_SESSION in case.body:
            live = sessions.get() or "no-session-could-be-started"
            case.body = case.body.replace(LIVE_SESSION, live)

    @schemathesis.hook
    def after_call(context, case, response) -> None:
        try:
            answer = response.json()
        except ValueError:
            return
        if not isinstance(answer, dict) or not isinstance(case.body, str):
            return
        field = root_field(case.body)
        opened = ((answer.get("data") or {}).get("startSession") or {}).get("sessionId")
        if field == "startSession" and opened:
            sessions.close(opened)
        live = sessions.current
        if live is None or json.dumps(live) not in case.body:
            return
        codes = {code for _, code in error_codes(answer)}
        if field == "closeSession" or codes & {"SESSION_NOT_FOUND", "RESOURCE_EXHAUSTED"}:
            sessions.drop(live)


def in_range(
    body: str, frame: int, object_id: int, prompt: tuple[list[tuple[float, float]], list[int]]
) -> str:
    """``body`` with the frame, object, points and labels it names replaced by these."""
    points, labels = prompt
    body = FRAME_VALUE.sub(rf"\g<1>{frame}", body)
    body = OBJECT_VALUE.sub(rf"\g<1>{object_id}", body)
    listed = ", ".join(f"[{x!r}, {y!r}]" for x, y in points)
    body = POINTS_VALUE.sub(lambda m: f"{m.group(1)}[{listed}]", body)
    return LABELS_VALUE.sub(lambda m: f"{m.group(1)}{labels}", body)


def with_body(case: Any, body: str) -> Any:
    """``case`` (schemathesis's ``Case``, freshly drawn) with ``body`` as its document."""
    case.body = body
    return case


# --- reading the run ------------------------------------------------------------------------------


def root_field(query: str) -> str:
    """The first root field a generated document selects (each case selects one)."""
    match = ROOT_FIELD.match(query)
    return match.group(2) if match else "?"


def operation(query: str) -> str:
    """``Query.field`` or ``Mutation.field``, as schemathesis names the operation."""
    match = ROOT_FIELD.match(query)
    if match is None:
        return "?"
    return ("Mutation." if match.group(1) == "mutation" else "Query.") + match.group(2)


def error_codes(answer: object) -> list[tuple[str, str | None]]:
    """Each GraphQL error of an answer: its message and its code (``None`` without one)."""
    if not isinstance(answer, dict) or not isinstance(answer.get("errors"), list):
        return []
    found = []
    for error in answer["errors"]:
        if not isinstance(error, dict):
            continue
        code = (error.get("extensions") or {}).get("code")
        found.append((str(error.get("message")), code))
    return found


def shown(text: str) -> str:
    return text if len(text) <= SHOWN_CHARS else text[:SHOWN_CHARS] + f"... ({len(text)} chars)"


def tracebacks(log: str) -> list[str]:
    """The last line (the exception) of each traceback in the server's log."""
    lines = log.splitlines()
    ends = []
    for number, line in enumerate(lines):
        if not line.startswith("Traceback"):
            continue
        end = next(
            (later for later in lines[number + 1 :] if later and not later.startswith(" ")),
            "(the log ends inside the traceback)",
        )
        ends.append(end)
    return ends


def summary(har: Path, log: str) -> int:
    """Print what the run saw; the number of 5xx answers."""
    entries = json.loads(har.read_text())["log"]["entries"] if har.exists() else []
    by_class: collections.Counter[str] = collections.Counter()
    by_status: collections.Counter[int] = collections.Counter()
    codes: collections.Counter[str] = collections.Counter()
    cases: collections.Counter[str] = collections.Counter()
    ran: collections.Counter[str] = collections.Counter()
    server_errors = []
    uncoded: dict[str, tuple[int, str]] = {}
    for entry in entries:
        status = entry["response"]["status"]
        request_text = entry["request"].get("postData", {}).get("text", "")
        response_text = entry["response"].get("content", {}).get("text", "")
        try:
            query = json.loads(request_text).get("query") or ""
        except (ValueError, AttributeError):
            query = ""
        name = operation(query)
        by_class[f"{status // 100}xx" if status else "no answer"] += 1
        by_status[status] += 1
        cases[name] += 1
        try:
            answer = json.loads(response_text)
        except ValueError:
            answer = None
        errors = error_codes(answer)
        for message, code in errors:
            codes[code or "(no code)"] += 1
            if code is None and 200 <= status < 300:
                count, example = uncoded.get(message, (0, request_text))
                uncoded[message] = (count + 1, example)
        if 200 <= status < 300 and not errors:
            ran[name] += 1
        if status >= 500:
            server_errors.append((name, status, request_text, response_text))

    print(f"\ncases sent: {len(entries)}")
    print("answers by status class: " + ", ".join(f"{k} {v}" for k, v in sorted(by_class.items())))
    print("answers by status: " + ", ".join(f"{k} {v}" for k, v in sorted(by_status.items())))
    print("GraphQL error codes: " + ", ".join(f"{k} {v}" for k, v in codes.most_common()))
    print("\noperation: cases, answered with data and no error")
    for name in sorted(cases):
        print(f"  {name}: {cases[name]}, {ran[name]}")
    print(f"\nserver errors (5xx): {len(server_errors)}")
    groups: dict[tuple[str, int], list[tuple[str, str]]] = collections.defaultdict(list)
    for name, status, request_text, response_text in server_errors:
        groups[name, status].append((request_text, response_text))
    for (name, status), found in sorted(groups.items()):
        # the shortest request of each kind: schemathesis's shrinking makes one small
        request_text, response_text = min(found, key=lambda pair: len(pair[0]))
        print(f"  {len(found)} x HTTP {status} for {name}, the shortest:")
        print(f"    POST /graphql {shown(request_text)}")
        print(f"    answered: {shown(response_text)}")
    print(f"GraphQL errors without a code in a 2xx: {sum(c for c, _ in uncoded.values())}")
    for message, (count, example) in uncoded.items():
        print(f"  {count} x {shown(message)}\n    e.g. POST /graphql {shown(example)}")
    ends = tracebacks(log)
    print(f"'Traceback' in the server log: {log.count('Traceback')}")
    for end, count in collections.Counter(ends).most_common():
        print(f"  {count} x {end}")
    return len(server_errors)


# --- the run --------------------------------------------------------------------------------------


def running(pid: int) -> bool:
    """Whether the process is there and not a zombie (its parent has not waited for it yet)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def env_pairs(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        key, equals, value = pair.partition("=")
        if not equals or not key:
            raise SystemExit(f"--server-env takes KEY=VALUE, not {pair!r}")
        env[key] = value
    return env


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--max-examples", type=int, default=200, help="cases per operation")
    parser.add_argument("--workers", type=int, default=2, help="schemathesis's workers")
    parser.add_argument("--seed", type=int, help="schemathesis's seed (else it draws one)")
    parser.add_argument("--max-time", type=int, help="seconds the whole run may take")
    parser.add_argument(
        "--schema-file", action="store_true", help="the committed schema.graphql, not introspection"
    )
    parser.add_argument(
        "--server-env", action="append", default=[], metavar="KEY=VALUE", help="for the server"
    )
    parser.add_argument("--report-dir", type=Path, default=ROOT / "test-output" / "graphql-fuzz")
    args = parser.parse_args()
    st = fuzz_venv()
    args.report_dir = args.report_dir.resolve()  # schemathesis runs in it
    args.report_dir.mkdir(parents=True, exist_ok=True)
    har = args.report_dir / "cases.har.json"
    har.unlink(missing_ok=True)

    with served(**env_pairs(args.server_env)) as server:
        url = f"{server.base_url}/graphql"
        video = graphql_post(url, "{ defaultVideo { id path frameCount } }")["data"]["defaultVideo"]
        command = [
            str(st),
            "run",
            str(ROOT / "schema.graphql") if args.schema_file else url,
            *(["--url", url] if args.schema_file else []),
            "--checks",
            CHECK,
            "--max-examples",
            str(args.max_examples),
            "--workers",
            str(args.workers),
            "--continue-on-failure",
            "--generation-database",
            "none",
            "--report",
            "har",
            "--report-har-path",
            str(har),
            "--no-color",
            *(["--seed", str(args.seed)] if args.seed is not None else []),
            *(["--max-time", str(args.max_time)] if args.max_time else []),
        ]
        print(" ".join(command[1:]), flush=True)
        env = {
            **os.environ,
            "SCHEMATHESIS_HOOKS": str(Path(__file__).resolve()),
            URL_VAR: url,
            VIDEO_VAR: json.dumps(video),
        }
        # in the report folder, where schemathesis keeps its own cache (.schemathesis/) too
        done = subprocess.run(command, cwd=args.report_dir, env=env, check=False)  # noqa: S603
        alive = running(server.pid)
        log = (server.var_dir / "daphne.log").read_text(errors="replace")
        (args.report_dir / "server.log").write_text(log)

    state = "up" if alive else "DOWN"
    print(f"\nschemathesis exited with {done.returncode}; the server was {state} at its end")
    server_errors = summary(har, log)
    print(f"(HAR file and server log in {args.report_dir})")
    return 1 if server_errors or not alive else 0


if __name__ == "_schemathesis_hooks":  # loaded by schemathesis as its hooks file
    install_hooks()
elif __name__ == "__main__":
    sys.exit(main())
