"""REDIS_SENTINELS / REDIS_SENTINEL_MASTER, or a `sentinel://` REDIS_URL (kombu's form): one
Sentinel setup for every Redis client and the broker, and clear errors for a bad one."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from config.celeryconfig import celery_settings
from cortex_workers.redis_target import SentinelTarget, parse_sentinels
from cortex_workers.settings import Settings


@pytest.fixture(autouse=True)
def _no_redis_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """These settings are built from their arguments: the suite's own Redis and broker URLs
    (set in the environment by the test stack) would take precedence."""
    for name in ("REDIS_URL", "CELERY_BROKER_URL", "REDIS_SENTINELS", "REDIS_SENTINEL_MASTER"):
        monkeypatch.delenv(name, raising=False)


def test_sentinels_and_master_give_the_redis_and_broker_urls() -> None:
    s = Settings(redis_sentinels="10.0.0.5:26379, 10.0.0.6", redis_sentinel_master="mymaster")
    assert s.sentinel() == SentinelTarget((("10.0.0.5", 26379), ("10.0.0.6", 26379)), "mymaster")
    assert s.redis_url == "sentinel://10.0.0.5:26379;sentinel://10.0.0.6:26379/0"
    assert s.broker_url == s.redis_url
    options = celery_settings(s)
    assert options["broker_transport_options"]["master_name"] == "mymaster"
    assert options["redbeat_redis_url"] == "redis-sentinel://"
    assert options["redbeat_redis_options"]["service_name"] == "mymaster"


def test_a_redis_url_gives_database_and_password_to_the_sentinels() -> None:
    s = Settings(
        redis_url="redis://:pw@ignored:6379/3",
        redis_sentinels="s1:26379",
        redis_sentinel_master="m",
    )
    target = s.sentinel()
    assert target is not None and (target.db, target.password) == (3, "pw")
    assert s.redis_url == "sentinel://:pw@s1:26379/3"


def test_kombus_url_form_is_accepted() -> None:
    s = Settings(redis_url="sentinel://s1:26380;sentinel://s2:26381/2", redis_sentinel_master="m")
    assert s.sentinel() == SentinelTarget((("s1", 26380), ("s2", 26381)), "m", db=2)


def test_a_plain_redis_url_is_not_sentinel() -> None:
    s = Settings(redis_url="redis://127.0.0.1:6379/0")
    assert s.sentinel() is None
    assert "master_name" not in celery_settings(s)["broker_transport_options"]
    assert celery_settings(s)["redbeat_redis_url"] == "redis://127.0.0.1:6379/0"


@pytest.mark.parametrize(
    "fields,message",
    [
        ({"redis_sentinels": "s1:26379"}, "REDIS_SENTINEL_MASTER is not set"),
        ({"redis_sentinels": "s1:port", "redis_sentinel_master": "m"}, "is not host:port"),
        ({"redis_url": "sentinel://s1;redis://s2", "redis_sentinel_master": "m"}, "sentinel://"),
    ],
)
def test_a_bad_sentinel_setup_says_what_to_fix(fields: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        Settings(**fields)


def test_sentinel_addresses_default_to_port_26379() -> None:
    assert parse_sentinels("a,b:1,[::1]:2") == (("a", 26379), ("b", 1), ("::1", 2))
