"""Operators' commands against a running `cortex-workers dev`, through its `--data-dir`:
tenants create, list and set; keys create, list and revoke (a revoked key answers 401 within
seconds)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
from support import api_ready, dev_env, free_port, start_dev, stop_dev, wait_until


def _cli(data_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cortex_workers.cli", *args, "--data-dir", str(data_dir)],
        env=dev_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )


def _rows(out: str) -> list[list[str]]:
    return [line.split("\t") for line in out.strip().splitlines()]


def test_tenants_and_keys_are_managed_through_the_data_dir_of_a_running_dev(
    tmp_path: Path,
) -> None:
    data_dir, port = tmp_path / "dev", free_port()
    base = f"http://127.0.0.1:{port}"
    proc = start_dev(data_dir, port, tmp_path / "dev.log")
    try:
        wait_until(lambda: api_ready(base), timeout=120, interval=0.5, what="dev stack ready")
        created = _cli(
            data_dir, "tenants", "create", "acme", "--daily-usd", "2.5", "--mode", "frugal"
        )
        assert created.returncode == 0, created.stderr
        assert _cli(data_dir, "tenants", "create", "acme").returncode == 1  # exists already
        updated = _cli(
            data_dir, "tenants", "set", "acme", "--per-user-hourly", "7", "--daily-usd", "none"
        )
        assert updated.returncode == 0, updated.stderr
        listed = _rows(_cli(data_dir, "tenants", "list").stdout)
        assert listed[0] == [
            "NAME",
            "DAILY_USD",
            "PER_USER_HOURLY",
            "SESSION_TOKEN_CAP",
            "MODE",
            "CREATED",
        ]
        acme = next(r for r in listed if r[0] == "acme")
        assert acme[1:5] == ["-", "7", "-", "frugal"]

        made = _cli(data_dir, "keys", "create", "--tenant", "acme")
        assert made.returncode == 0, made.stderr
        key = made.stdout.strip().splitlines()[-1]
        headers = {"Authorization": f"Bearer {key}"}
        assert httpx.get(f"{base}/v1/budget", headers=headers).status_code == 200
        keys = _rows(_cli(data_dir, "keys", "list", "--tenant", "acme").stdout)
        assert keys[0] == ["ID", "TENANT", "PREFIX", "CREATED", "LAST_USED", "REVOKED"]
        (key_id, tenant, prefix, created_at, last_used, revoked) = keys[1]
        assert (tenant, prefix, revoked) == ("acme", key.split("_")[1], "-")
        assert created_at != "-" and last_used != "-"  # the call above was recorded
        assert len(keys) == 2  # only acme's

        revoked_out = _cli(data_dir, "keys", "revoke", key_id)
        assert revoked_out.returncode == 0, revoked_out.stderr
        wait_until(
            lambda: httpx.get(f"{base}/v1/budget", headers=headers).status_code == 401,
            timeout=5,
            what="the revoked key refused",
        )
        assert _cli(data_dir, "keys", "revoke", key_id).returncode == 1  # revoked already
        after = _rows(_cli(data_dir, "keys", "list").stdout)
        assert next(r for r in after if r[0] == key_id)[5] != "-"
    finally:
        stop_dev(proc)
