from __future__ import annotations

from io import StringIO
from pathlib import Path

import pytest
from django.conf import settings
from django.core.management import call_command


def test_committed_schema_matches_the_code(tmp_path):
    printed = tmp_path / "schema.graphql"

    call_command("graphql_schema", out=str(printed), stdout=StringIO())

    committed = Path(settings.GRAPHENE["SCHEMA_OUTPUT"]).read_text(encoding="utf-8")
    assert printed.read_text(encoding="utf-8") == committed, (
        "schema.graphql is stale: `make schema`"
    )


@pytest.mark.django_db
def test_models_and_migrations_agree():
    out = StringIO()

    # Raises SystemExit(1) when a model change has no migration.
    call_command("makemigrations", "--check", "--dry-run", stdout=out)

    assert out.getvalue() == "No changes detected\n"
