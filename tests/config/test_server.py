"""The project served by the real ASGI server, exactly as `make run` starts it."""

from __future__ import annotations

import requests

from config import __version__
from tests.conftest import ROOT

VENDOR = ROOT / "vendor"

INTROSPECTION = "{ __schema { queryType { name } types { name } } }"


def test_healthz_over_http(asgi_server):
    response = requests.get(f"{asgi_server}/healthz", timeout=5)

    assert response.status_code == 200
    assert response.json() == {"status": "ok", "version": __version__, "engine": "classic"}


def test_graphql_introspection_over_http(asgi_server):
    response = requests.post(f"{asgi_server}/graphql", json={"query": INTROSPECTION}, timeout=5)

    assert response.status_code == 200
    schema = response.json()["data"]["__schema"]
    assert schema["queryType"] == {"name": "Query"}
    names = {t["name"] for t in schema["types"]}
    assert {"Query", "Pong", "PingInput"} <= names


def test_graphiql_and_its_scripts_are_served(asgi_server):
    page = requests.get(f"{asgi_server}/graphql", headers={"Accept": "text/html"}, timeout=5)
    script = requests.get(f"{asgi_server}/static/vendor/graphiql/graphiql.min.js", timeout=5)

    assert page.status_code == 200
    assert "graphiql.min.js" in page.text
    assert script.status_code == 200
    assert script.headers["Content-Type"] == "text/javascript"
    assert script.content == (VENDOR / "graphiql" / "graphiql.min.js").read_bytes()


def test_admin_login_page_has_its_stylesheet(asgi_server):
    page = requests.get(f"{asgi_server}/admin/login/", timeout=5)
    css = requests.get(f"{asgi_server}/static/admin/css/base.css", timeout=5)

    assert page.status_code == 200
    assert css.status_code == 200
