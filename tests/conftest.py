"""Fixtures shared by the whole suite."""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import ipaddress
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests

from tests.background_evaluations import Evaluations

ROOT = Path(__file__).resolve().parent.parent
SERVER_COMMAND = [sys.executable, "-m", "edge.server"]
# A bound, not a measure: a server loading a SAM 2 checkpoint on a 2-core machine shared with
# other test runs took over 30 s to start (alone it starts in a few seconds).
STARTUP_TIMEOUT_SEC = 90
LISTENING = re.compile(r"Listening on TCP address 127\.0\.0\.1:(\d+)")
# how often a starting server's log is read: the tests start about a hundred, and each waited
# half of this, on average, past its start
LISTENING_POLL_SEC = 0.02


# The tests' upstreams (fake providers) listen on loopback, which the hub refuses by default.
LOOPBACK_UPSTREAMS = "127.0.0.0/8,::1"


def project_env(var_dir: Path, **overrides: str) -> dict[str, str]:
    """Environment for a subprocess of the project: embedded defaults under ``var_dir``, and
    upstreams on loopback allowed."""
    # the engine is chosen afresh for the subprocess's own models folder, unless given here
    inherited = {"DATABASE_URL", "REDIS_URL", "SEGMENTATION_ENGINE", "SAM2_CHECKPOINT"}
    # ...and it keeps the bytecode it compiles, as `make run` does: the tests start about a
    # hundred servers and commands, and each compiled the project's 150 modules afresh (0.1 to
    # 0.2 s of a core) where the environment said not to write it.
    inherited.add("PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if k not in inherited}
    env.setdefault("CHANNELS_UPSTREAM_ALLOW", LOOPBACK_UPSTREAMS)
    env.update({"VAR_DIR": str(var_dir), "DJANGO_SETTINGS_MODULE": "config.settings"})
    env.update(overrides)
    return env


def manage(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


# A folder this run's processes (xdist's workers) share, named by the controller (or the only
# process) in pytest_configure: what is prepared there once serves them all.
SHARED_VARIABLE = "TESTS_SHARED_FOLDER"


def shared_prepared(name: str, make: Callable[[Path], None]) -> Path:
    """The folder ``name`` of the run's shared folder: made by ``make`` (given a new, empty
    folder) in the first process that asks, while the others wait for it."""
    if SHARED_VARIABLE not in os.environ:  # a process of its own, not under pytest_configure
        os.environ[SHARED_VARIABLE] = tempfile.mkdtemp(prefix="tests-shared-")
        atexit.register(shutil.rmtree, os.environ[SHARED_VARIABLE], ignore_errors=True)
    shared = Path(os.environ[SHARED_VARIABLE])
    target = shared / name
    with (shared / f"{name}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when closed, whatever happens
        if not target.exists():
            making = Path(tempfile.mkdtemp(prefix=f"{name}-", dir=shared))
            make(making)
            making.rename(target)
    return target


# The SQLite databases this process migrated or copied from a migrated one: the migrations
# cannot change while it runs, so these need no second look.
_migrated_databases: set[Path] = set()


def _migrate(folder: Path) -> None:
    done = manage("migrate", "--noinput", env=project_env(folder))
    assert done.returncode == 0, done.stderr


def migrated(env: dict[str, str]) -> None:
    """What `manage.py migrate --noinput` gives the database ``env`` names. A new SQLite
    database under VAR_DIR is a copy of one migrated once for the run (by the first of xdist's
    workers to need it): the command takes about 2 s of a core, and the tests start dozens of
    servers. One this process has migrated already (a server started again on it, a copy of
    :func:`default_video_var`'s) is left as it is. Any other database (one that exists, or
    PostgreSQL) is migrated by the command itself."""
    target = (Path(env["VAR_DIR"]) / "db.sqlite3").resolve()
    if not env.get("DATABASE_URL") and target.exists() and target in _migrated_databases:
        return
    if env.get("DATABASE_URL") or target.exists():
        done = manage("migrate", "--noinput", env=env)
        assert done.returncode == 0, done.stderr
        if not env.get("DATABASE_URL"):
            _migrated_databases.add(target)
        return
    template = shared_prepared("migrated", _migrate) / "db.sqlite3"
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(template, target)
    _migrated_databases.add(target)


def server_import(env: dict[str, str]) -> subprocess.CompletedProcess:
    """What the server does at its start before it listens (it imports config.asgi, which
    builds the engine), in a process of its own with ``env``."""
    return subprocess.run(
        [sys.executable, "-c", "import config.asgi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.fixture(autouse=True, scope="session")
def loopback_upstreams_allowed() -> None:
    """The hubs this test process builds may read the tests' upstreams on loopback."""
    from django.conf import settings

    settings.CHANNELS_UPSTREAM_ALLOW = tuple(
        ipaddress.ip_network(network) for network in LOOPBACK_UPSTREAMS.split(",")
    )


@pytest.fixture(autouse=True, scope="session")
def fast_password_hashing() -> None:
    """The users this test process makes get an MD5 hash, as Django's testing docs advise:
    PBKDF2's million rounds took 1 to 6 s a user on 2 loaded cores. (The servers the tests
    start keep the real hashers.)"""
    from django.conf import settings

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture(autouse=True)
def rate_limits_reset() -> Iterator[None]:
    """Each test's requests in this process count against fresh per-client limits: the test
    client's requests all come from one address, and the limits' cache outlives a test."""
    yield
    from django.core.cache import cache

    cache.clear()


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def running_server(
    var_dir: Path, port: int = 0, log_name: str = "daphne.log", **env_overrides: str
) -> Iterator[str]:
    """Migrate, then run the real ASGI server (daphne) on a loopback port (by default a free
    one), as `make run` does; yields its base URL and stops it on exit. Several servers may
    share a ``var_dir`` (and so a database) with a log each."""
    env = project_env(var_dir, **env_overrides)
    migrated(env)
    log_path = var_dir / log_name
    with log_path.open("w") as log:
        process = subprocess.Popen(
            [
                *SERVER_COMMAND,
                "--bind",
                "127.0.0.1",
                "--port",
                str(port),
                "config.asgi:application",
            ],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    try:
        yield _wait_listening(process, log_path)
    except GeneratorExit:
        raise
    except BaseException:
        # A failing test shows what the server said (its log is gone with the tmp folder).
        print(f"--- the end of {log_name} ---", *_tail(log_path), sep="\n", file=sys.stderr)
        raise
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def _tail(path: Path, lines: int = 60) -> list[str]:
    return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]


def server_pid(server: str) -> int:
    """The pid of the server process started for ``server``'s port (given to
    :func:`running_server`)."""
    port = server.rsplit(":", 1)[1]
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as cmdline:
                arguments = cmdline.read().split(b"\0")
        except OSError:
            continue
        if b"edge.server" in arguments and port.encode() in arguments:
            return int(entry)
    raise AssertionError(f"no server process listens at {server}")


def _default_video_drawn(var_dir: Path) -> None:
    env = project_env(var_dir)
    migrated(env)
    drawn = manage("default_video", env=env)
    assert drawn.returncode == 0, drawn.stderr


@pytest.fixture(scope="session")
def _default_video_var() -> Path:
    """A VAR_DIR migrated and holding the drawn default video, made once for the run (drawing
    it takes 2 s of a core): to be copied, never used in place."""
    var_dir = shared_prepared("default-video-var", _default_video_drawn)
    _migrated_databases.add((var_dir / "db.sqlite3").resolve())
    return var_dir


@pytest.fixture(scope="module")
def default_video_var(_default_video_var: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A VAR_DIR of this module's own, migrated and holding the drawn default video (drawn once
    for the run, and copied)."""
    return var_copied(_default_video_var, tmp_path_factory.mktemp("var") / "var")


def var_copied(source: Path, target: Path) -> Path:
    """``target``, a new copy of the VAR_DIR ``source``, whose database :func:`migrated` has
    given (so servers started on the copy need not migrate it again)."""
    shutil.copytree(source, target)
    if (source / "db.sqlite3").resolve() in _migrated_databases:
        _migrated_databases.add((target / "db.sqlite3").resolve())
    return target


@pytest.fixture(scope="session")
def asgi_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real server for the session, with its own SQLite database under a temporary VAR_DIR."""
    with running_server(tmp_path_factory.mktemp("server-var")) as base_url:
        yield base_url


def _wait_listening(process: subprocess.Popen, log_path: Path) -> str:
    deadline = time.monotonic() + STARTUP_TIMEOUT_SEC
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"daphne exited with {process.returncode}:\n{log_path.read_text()}")
        match = LISTENING.search(log_path.read_text())
        if match:
            base_url = f"http://127.0.0.1:{match.group(1)}"
            # Listening is not yet serving: wait for the first answer.
            try:
                requests.get(f"{base_url}/healthz", timeout=2)
            except requests.ConnectionError:
                pass
            else:
                return base_url
        time.sleep(LISTENING_POLL_SEC)
    pytest.fail(f"daphne did not start within {STARTUP_TIMEOUT_SEC}s:\n{log_path.read_text()}")


CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "test-output" / "screenshots"


@pytest.fixture(scope="module")
def browser():
    """Debian's Chromium driven by Playwright (browsers cannot be downloaded here).

    Per module: Playwright's sync API keeps an event loop running on the main thread while it
    lives, and async tests collected after it could not start their own."""
    if not CHROMIUM.exists():
        pytest.skip(f"Chromium is not installed at {CHROMIUM} (.ci/run installs it with apt)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(
            executable_path=str(CHROMIUM),
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--autoplay-policy=no-user-gesture-required",
            ],
        )
        yield chromium
        chromium.close()


@pytest.fixture
def page(browser, request):
    """A fresh page; ``page.shot(name)`` saves a screenshot under test-output/screenshots."""
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def shot(name: str) -> None:
        page.screenshot(path=SCREENSHOTS / f"{request.node.name}-{name}.png")

    page.shot = shot
    yield page
    context.close()


DATABASE_FIXTURES = {"db", "transactional_db", "django_db_setup"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark the tests that use this process's database ``database``: `make test` runs them a
    second time on PostgreSQL. (Servers started by the tests keep their own SQLite.) Put the
    tests of ``evaluation`` runs last."""
    for item in items:
        if item.get_closest_marker("django_db") or DATABASE_FIXTURES & set(
            getattr(item, "fixturenames", ())
        ):
            item.add_marker(pytest.mark.database)
    # The tests of background evaluations last, so that those have the whole suite's idle time.
    waiting = [item for item in items if item.get_closest_marker("evaluation")]
    items[:] = [item for item in items if item not in waiting] + waiting


@pytest.fixture
def evaluation(request: pytest.FixtureRequest) -> dict:
    """The figures of the test's ``evaluation`` run (tests/background_evaluations.py)."""
    marker = request.node.get_closest_marker("evaluation")
    return request.config.stash[EVALUATIONS].figures(marker.args)


EVALUATIONS = pytest.StashKey[Evaluations]()


def pytest_configure(config: pytest.Config) -> None:
    # The controller (or the only process) holds the runs' folder and the shared folder;
    # xdist's workers share them.
    worker = hasattr(config, "workerinput")
    config.stash[EVALUATIONS] = Evaluations.for_worker() if worker else Evaluations.for_controller()
    if not worker:
        os.environ[SHARED_VARIABLE] = tempfile.mkdtemp(prefix="tests-shared-")


def pytest_unconfigure(config: pytest.Config) -> None:
    if not hasattr(config, "workerinput"):
        config.stash[EVALUATIONS].stop()
        shutil.rmtree(os.environ.pop(SHARED_VARIABLE), ignore_errors=True)


def pytest_collection_finish(session: pytest.Session) -> None:
    session.config.stash[EVALUATIONS].start(session.items)


@pytest.fixture(scope="session")
def django_db_modify_db_settings(
    django_db_modify_db_settings_parallel_suffix: None, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """SQLite's test database in a file of this worker's, not in memory: in memory (a shared
    cache) a second thread's write is refused at once ("database table is locked") instead of
    waiting its turn, and the propagation jobs' threads write beside the test's."""
    from django.conf import settings

    database = settings.DATABASES["default"]
    if database["ENGINE"] == "django.db.backends.sqlite3":
        folder = tmp_path_factory.mktemp("test-database")
        database.setdefault("TEST", {})["NAME"] = str(folder / "db.sqlite3")
