"""An honest /ts viewer while hostile clients attack /ts (issue 47, items 1 and 2).

    .venv/bin/python benchmarks/hostile_viewers.py [--resets 200] [--stalled 8] [--honest 30]

Runs the real server (default settings) relaying one upstream at 4 Mbit/s
(loopback_fakes/sample_upstream.py). For each phase (calm, then each attack), an honest
viewer connects ``--samples`` times in turn and reads 2 s of the stream: its time to the first
byte and the rate it got; then ``--honest`` viewers ask at once, and how many were let in is
counted. The attacks:

- ``resets``: ``--resets`` connections that send ``GET /ts`` and close with a TCP reset
  (``SO_LINGER`` 0), back to back, while the honest viewer watches;
- ``stalled``: ``--stalled`` clients that send ``GET /ts`` and never read, held for the phase.

After each attack it reports how long the server took to count only the honest viewers again,
the tracebacks in its log, and the server's CPU seconds and peak RSS over the phase.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import requests  # noqa: E402

from benchmarks.fanout import cpu_seconds, rss_mb  # noqa: E402
from benchmarks.local_server import Served, served  # noqa: E402

WATCH_SEC = 2.0


def watch(host: str, port: int, seconds: float = WATCH_SEC) -> tuple[float, float] | None:
    """Time to the first byte and the rate (Mbit/s) of one viewer over ``seconds`` (0: the
    first read alone); None when refused."""
    connection = http.client.HTTPConnection(host, port, timeout=10)
    started = time.monotonic()
    connection.request("GET", "/ts")
    response = connection.getresponse()
    if response.status != 200:
        response.read()
        connection.close()
        return None
    first = response.read1(65536)
    first_at = time.monotonic()
    got = len(first)
    while time.monotonic() - first_at < seconds:
        got += len(response.read1(65536))
    connection.close()
    return first_at - started, got * 8 / max(time.monotonic() - first_at, 1e-6) / 1e6


def admitted(host: str, port: int, count: int) -> int:
    """How many of ``count`` viewers asking at once get 200 and their first bytes."""
    results: list[bool] = []

    def one() -> None:
        with contextlib.suppress(OSError, http.client.HTTPException):
            connection = http.client.HTTPConnection(host, port, timeout=10)
            connection.request("GET", "/ts")
            response = connection.getresponse()
            results.append(response.status == 200 and bool(response.read1(1024)))
            connection.close()

    threads = [threading.Thread(target=one) for _ in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return sum(results)


def reset_burst(host: str, port: int, count: int) -> None:
    for _ in range(count):
        with socket.create_connection((host, port), timeout=5) as sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            sock.sendall(b"GET /ts HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")


def stalled_readers(host: str, port: int, count: int) -> list[socket.socket]:
    readers = []
    for _ in range(count):
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        sock.connect((host, port))
        sock.sendall(b"GET /ts HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        readers.append(sock)
    return readers


def viewers(base_url: str) -> int:
    return requests.get(f"{base_url}/api/admin/status", timeout=10).json()["viewers"]


def phase(name: str, base_url: str, pid: int, args: argparse.Namespace, attack) -> dict:
    host, port = base_url.rsplit("/", 1)[1].split(":")
    port = int(port)
    cpu, peak = cpu_seconds(pid), rss_mb(pid)
    held = attack(host, port) if attack else None
    samples = []
    for _ in range(args.samples):
        samples.append(watch(host, port))
        peak = max(peak, rss_mb(pid))
    let_in = admitted(host, port, args.honest)
    for sock in held or ():
        sock.close()
    ended = time.monotonic()
    while viewers(base_url) != 0 and time.monotonic() - ended < 120:
        time.sleep(0.1)
    served_ok = [s for s in samples if s is not None]
    return {
        "phase": name,
        "refused": len(samples) - len(served_ok),
        "first_byte_ms": statistics.median(s[0] for s in served_ok) * 1000 if served_ok else None,
        "mbit_s": statistics.median(s[1] for s in served_ok) if served_ok else None,
        "honest_admitted": f"{let_in}/{args.honest}",
        "settled_after_s": round(time.monotonic() - ended, 1),
        "cpu_s": round(cpu_seconds(pid) - cpu, 1),
        "peak_rss_mb": round(max(peak, rss_mb(pid))),
    }


@contextlib.contextmanager
def live_channel(**env_overrides: str) -> Iterator[Served]:
    """The real server (default settings but ``env_overrides``) relaying one upstream at 4
    Mbit/s (loopback_fakes/sample_upstream.py, on loopback) as its active channel."""
    with tempfile.TemporaryDirectory() as work:
        port_file = Path(work) / "upstream.port"
        upstream = subprocess.Popen(  # noqa: S603 (our own interpreter and script)
            [sys.executable, "-m", "loopback_fakes.sample_upstream", str(port_file)],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
        )
        try:
            while not port_file.exists() or not port_file.read_text():
                time.sleep(0.05)
            playlist = Path(work) / "channels.m3u"
            playlist.write_text(
                f'#EXTM3U\n#EXTINF:-1 tvg-id="live",Live\n'
                f"http://127.0.0.1:{port_file.read_text()}/live.ts\n"
            )
            with served(CHANNELS_PLAYLIST_PATH=str(playlist), **env_overrides) as server:
                selected = requests.post(
                    f"{server.base_url}/api/admin/channel", json={"channel_id": "live"}, timeout=10
                )
                selected.raise_for_status()
                time.sleep(2)
                yield server
        finally:
            upstream.terminate()
            upstream.wait(timeout=10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--resets", type=int, default=200)
    parser.add_argument("--stalled", type=int, default=8)
    parser.add_argument("--honest", type=int, default=30)
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    with live_channel() as server:

        def resets(host: str, port: int) -> list[socket.socket]:
            burst = threading.Thread(target=reset_burst, args=(host, port, args.resets))
            burst.start()  # while the honest viewer watches
            return []

        def stalled(host: str, port: int) -> list[socket.socket]:
            readers = stalled_readers(host, port, args.stalled)
            time.sleep(3)  # their sockets back up
            return readers

        for name, attack in (("calm", None), ("resets", resets), ("stalled", stalled)):
            print(phase(name, server.base_url, server.pid, args, attack), flush=True)
        log = (server.var_dir / "daphne.log").read_text(errors="replace")
        print({"tracebacks": log.count("Traceback")})


if __name__ == "__main__":
    main()
