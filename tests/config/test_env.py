from __future__ import annotations

import stat

import pytest
from django.core.exceptions import ImproperlyConfigured

from config.env import (
    channel_layers_config,
    database_config,
    env_bool,
    env_int,
    env_list,
    secret_key_load,
)


def test_secret_key_is_generated_once_and_kept_private(tmp_path):
    path = tmp_path / "var" / "secret_key"

    first = secret_key_load(environ={}, path=path)
    second = secret_key_load(environ={}, path=path)

    assert first == second
    assert len(first) == 67
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_secret_key_from_the_environment_wins_and_writes_nothing(tmp_path):
    path = tmp_path / "secret_key"

    key = secret_key_load(environ={"SECRET_KEY": "from-env"}, path=path)

    assert key == "from-env"
    assert not path.exists()


def test_no_database_url_means_sqlite_under_var(tmp_path):
    config = database_config("", sqlite_path=tmp_path / "db.sqlite3")

    assert config["ENGINE"] == "django.db.backends.sqlite3"
    assert config["NAME"] == str(tmp_path / "db.sqlite3")


def test_postgres_database_url_is_parsed(tmp_path):
    config = database_config(
        "postgres://seg:pw@db.internal:6543/segmentation", sqlite_path=tmp_path / "db.sqlite3"
    )

    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert (config["NAME"], config["USER"], config["PASSWORD"]) == ("segmentation", "seg", "pw")
    assert (config["HOST"], config["PORT"]) == ("db.internal", 6543)
    assert config["CONN_HEALTH_CHECKS"] is True


def test_other_database_schemes_are_refused(tmp_path):
    with pytest.raises(ImproperlyConfigured) as error:
        database_config("mysql://root@localhost/x", sqlite_path=tmp_path / "db.sqlite3")

    assert str(error.value) == (
        "DATABASE_URL must be a postgres:// or postgresql:// URL, got scheme 'mysql'"
    )


def test_channel_layer_is_in_memory_without_redis_url():
    assert channel_layers_config("") == {
        "default": {"BACKEND": "channels.layers.InMemoryChannelLayer"}
    }


def test_channel_layer_is_redis_with_redis_url():
    assert channel_layers_config("redis://127.0.0.1:6379/2") == {
        "default": {
            "BACKEND": "edge.channel_layer.OneTripRedisChannelLayer",
            "CONFIG": {
                "hosts": [{"address": "redis://127.0.0.1:6379/2", "socket_timeout": 15}],
                "channel_capacity": {"segmentation.*": 1000},
            },
        }
    }


def test_bad_redis_url_is_refused():
    with pytest.raises(ImproperlyConfigured) as error:
        channel_layers_config("127.0.0.1:6379")

    assert str(error.value) == (
        "REDIS_URL must be a redis://, rediss:// or unix:// URL, got '127.0.0.1:6379'"
    )


@pytest.mark.parametrize(
    ("raw", "expected"), [("1", True), ("TRUE", True), ("on", True), ("0", False), ("no", False)]
)
def test_env_bool_reads_common_spellings(raw, expected):
    assert env_bool("DEBUG", not expected, environ={"DEBUG": raw}) is expected


def test_env_bool_refuses_anything_else():
    with pytest.raises(ImproperlyConfigured) as error:
        env_bool("DEBUG", False, environ={"DEBUG": "maybe"})

    assert str(error.value) == "DEBUG must be a boolean (1/0, true/false), got 'maybe'"


def test_env_int_checks_type_and_minimum():
    assert env_int("MAX_SESSIONS", 32, environ={}) == 32
    assert env_int("MAX_SESSIONS", 32, environ={"MAX_SESSIONS": "8"}) == 8
    with pytest.raises(ImproperlyConfigured) as not_a_number:
        env_int("MAX_SESSIONS", 32, environ={"MAX_SESSIONS": "many"})
    with pytest.raises(ImproperlyConfigured) as too_small:
        env_int("MAX_SESSIONS", 32, minimum=1, environ={"MAX_SESSIONS": "0"})

    assert str(not_a_number.value) == "MAX_SESSIONS must be an integer, got 'many'"
    assert str(too_small.value) == "MAX_SESSIONS must be at least 1, got 0"


def test_env_list_splits_on_commas_and_drops_blanks():
    environ = {"ALLOWED_HOSTS": " a.example, ,b.example "}

    assert env_list("ALLOWED_HOSTS", ["x"], environ=environ) == ["a.example", "b.example"]
    assert env_list("ALLOWED_HOSTS", ["x"], environ={}) == ["x"]
