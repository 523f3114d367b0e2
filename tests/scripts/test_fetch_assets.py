"""scripts/fetch_assets.py against a real HTTP server on loopback standing in for the registry."""

from __future__ import annotations

import base64
import hashlib
import http.server
import io
import json
import tarfile
import threading

import pytest

from scripts.fetch_assets import main


def npm_tarball(files: dict[str, bytes]) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as archive:
        for name, content in files.items():
            info = tarfile.TarInfo(f"package/{name}")
            info.size = len(content)
            archive.addfile(info, io.BytesIO(content))
    return buffer.getvalue()


def sri(payload: bytes) -> str:
    return "sha512-" + base64.b64encode(hashlib.sha512(payload).digest()).decode()


@pytest.fixture
def registry():
    """A loopback HTTP server; tests put tarballs into ``served`` by URL path."""
    served: dict[str, bytes] = {}
    requests_seen: list[str] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            requests_seen.append(self.path)
            body = served.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}", served, requests_seen
    server.shutdown()
    server.server_close()


def fetch(tmp_path, url, *packages, manifest_name="assets.json"):
    """Run the script on a manifest of ``packages``, installing into ``tmp_path / "vendor"``."""
    manifest = tmp_path / manifest_name
    manifest.write_text(json.dumps({"packages": list(packages)}), encoding="utf-8")
    dest = tmp_path / "vendor"
    return main(["--manifest", str(manifest), "--dest", str(dest), "--registry", url])


def test_fetches_checks_and_extracts_only_the_listed_files(tmp_path, registry):
    url, served, seen = registry
    tarball = npm_tarball({"dist/lib.min.js": b"lib();", "README.md": b"# lib"})
    served["/@scope/lib/-/lib-1.2.3.tgz"] = tarball
    package = {"name": "@scope/lib", "version": "1.2.3", "integrity": sri(tarball)}
    package["files"] = ["dist/lib.min.js"]
    dest = tmp_path / "vendor"

    first = fetch(tmp_path, url, package)
    second = fetch(tmp_path, url, package)

    assert (first, second) == (0, 0)
    assert (dest / "@scope/lib/dist/lib.min.js").read_bytes() == b"lib();"
    assert not (dest / "@scope/lib/README.md").exists()
    assert seen == ["/@scope/lib/-/lib-1.2.3.tgz"]  # the second run found it in place


def test_integrity_mismatch_fails_and_keeps_the_installed_version(tmp_path, registry, capsys):
    url, served, _ = registry
    good = npm_tarball({"lib.js": b"v1"})
    served["/lib/-/lib-1.0.0.tgz"] = good
    dest = tmp_path / "vendor"
    entry = {"name": "lib", "version": "1.0.0", "integrity": sri(good), "files": ["lib.js"]}
    assert fetch(tmp_path, url, entry) == 0
    tampered = npm_tarball({"lib.js": b"evil"})
    served["/lib/-/lib-2.0.0.tgz"] = tampered
    upgrade = {**entry, "version": "2.0.0", "integrity": sri(b"what the lock expects")}

    code = fetch(tmp_path, url, upgrade)

    assert code == 1
    assert capsys.readouterr().err.startswith("fetch_assets: lib@2.0.0: integrity mismatch")
    assert (dest / "lib/lib.js").read_bytes() == b"v1"
    assert sorted(p.name for p in dest.iterdir()) == ["lib"]


def test_missing_file_in_the_package_is_an_error(tmp_path, registry, capsys):
    url, served, _ = registry
    tarball = npm_tarball({"other.js": b"x"})
    served["/lib/-/lib-1.0.0.tgz"] = tarball
    package = {"name": "lib", "version": "1.0.0", "integrity": sri(tarball), "files": ["lib.js"]}

    code = fetch(tmp_path, url, package)

    assert code == 1
    assert capsys.readouterr().err == "fetch_assets: lib@1.0.0 has no file lib.js\n"
    assert list((tmp_path / "vendor").iterdir()) == []


def test_unreachable_registry_is_a_clear_error(tmp_path, registry, capsys):
    url, _, _ = registry
    package = {"name": "lib", "version": "1.0.0", "integrity": sri(b""), "files": ["lib.js"]}

    code = fetch(tmp_path, url, package)

    assert code == 1
    assert capsys.readouterr().err == (
        f"fetch_assets: lib@1.0.0: cannot download {url}/lib/-/lib-1.0.0.tgz: "
        "HTTP Error 404: Not Found\n"
    )
