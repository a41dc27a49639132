"""`cortex-workers tenants create|list|set` and `keys list|revoke`: operators' commands.

Like `keys create`, they reach the embedded servers of `cortex-workers dev --data-dir` when no
database URL is set. A revoked key is refused by every API process within ~2 seconds (the API
caches key lookups that long).
"""

from __future__ import annotations

import argparse
import sys
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path

from .admin import migrate, use_embedded_if_unset
from .budget import micros_to_usd, usd_to_micros
from .vocabulary import LlmMode

CLEAR = "none"
"""A flag's value that clears a tenant's override (the configured value applies again)."""
OVERRIDES = {
    "daily_usd": "daily_usd_limit_micros",
    "per_user_hourly": "per_user_hourly_limit",
    "session_token_cap": "session_token_cap",
    "mode": "mode",
}
"""Flags (as argparse names them) and the tenant columns they set."""


@contextmanager
def _database(data_dir: str) -> Iterator[None]:
    stack = use_embedded_if_unset(Path(data_dir))
    try:
        migrate()
        yield
    finally:
        if stack is not None:
            stack.stop()


def _or_clear(parse: Callable[[str], int | LlmMode]) -> Callable[[str], int | LlmMode | None]:
    def parser(text: str) -> int | LlmMode | None:
        return None if text.lower() == CLEAR else parse(text)

    return parser


def _dollars(text: str) -> int:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError("a limit cannot be negative")
    return usd_to_micros(value)


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def add_override_flags(parser: argparse.ArgumentParser) -> None:
    """The override flags; one not given is absent from the parsed arguments."""
    hidden = argparse.SUPPRESS
    parser.add_argument(
        "--daily-usd", type=_or_clear(_dollars), default=hidden, help="daily limit in USD"
    )
    parser.add_argument(
        "--per-user-hourly", type=_or_clear(_positive), default=hidden, help="turns per end user"
    )
    parser.add_argument(
        "--session-token-cap", type=_or_clear(_positive), default=hidden, help="tokens a session"
    )
    parser.add_argument(
        "--mode", type=_or_clear(LlmMode), default=hidden, help="normal, frugal or local-only"
    )
    parser.epilog = f"A value of {CLEAR!r} clears an override: the configured value applies."


def _changes(args: argparse.Namespace) -> dict[str, int | LlmMode | None]:
    given = vars(args)
    return {column: given[flag] for flag, column in OVERRIDES.items() if flag in given}


def cmd_tenants_create(args: argparse.Namespace) -> int:
    from .runtime import get_runtime
    from .store import tenant_admin
    from .store.db import transaction

    with _database(args.data_dir), transaction(get_runtime().db) as db:
        if tenant_admin.create_tenant(db, args.name) is None:
            print(f"cortex-workers: tenant {args.name!r} exists already", file=sys.stderr)
            return 1
        changes = _changes(args)
        if changes:
            tenant_admin.set_overrides(db, args.name, changes)
    print(f"created tenant {args.name}")
    return 0


def cmd_tenants_set(args: argparse.Namespace) -> int:
    from .runtime import get_runtime
    from .store import tenant_admin
    from .store.db import transaction

    changes = _changes(args)
    if not changes:
        print("cortex-workers: nothing to set (see --help)", file=sys.stderr)
        return 2
    with _database(args.data_dir), transaction(get_runtime().db) as db:
        if not tenant_admin.set_overrides(db, args.name, changes):
            print(f"cortex-workers: no tenant {args.name!r}", file=sys.stderr)
            return 1
    print(f"updated tenant {args.name}")
    return 0


def _when(moment: datetime | None) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ") if moment is not None else "-"


def _shown(value: object) -> str:
    return "-" if value is None else str(value)


def cmd_tenants_list(args: argparse.Namespace) -> int:
    from .runtime import get_runtime
    from .store import tenant_admin
    from .store.db import transaction

    with _database(args.data_dir), transaction(get_runtime().db) as db:
        rows = tenant_admin.list_tenants(db)
    print("NAME\tDAILY_USD\tPER_USER_HOURLY\tSESSION_TOKEN_CAP\tMODE\tCREATED")
    for t in rows:
        o = t.overrides
        daily = (
            micros_to_usd(o.daily_usd_limit_micros)
            if o.daily_usd_limit_micros is not None
            else None
        )
        print(
            "\t".join(
                [
                    t.name,
                    _shown(daily),
                    _shown(o.per_user_hourly_limit),
                    _shown(o.session_token_cap),
                    _shown(o.mode),
                    _when(t.created_at),
                ]
            )
        )
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    from .runtime import get_runtime
    from .store import tenant_admin
    from .store.db import transaction

    with _database(args.data_dir), transaction(get_runtime().db) as db:
        rows = tenant_admin.list_keys(db, args.tenant)
    print("ID\tTENANT\tPREFIX\tCREATED\tLAST_USED\tREVOKED")
    for k in rows:
        print(
            "\t".join(
                [
                    str(k.id),
                    k.tenant,
                    k.prefix,
                    _when(k.created_at),
                    _when(k.last_used_at),
                    _when(k.revoked_at),
                ]
            )
        )
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from .runtime import get_runtime
    from .store import tenant_admin
    from .store.db import transaction

    try:
        key_id = uuid.UUID(args.id)
    except ValueError:
        print(f"cortex-workers: not a key id: {args.id!r} (see keys list)", file=sys.stderr)
        return 2
    with _database(args.data_dir), transaction(get_runtime().db) as db:
        revoked = tenant_admin.revoke_key(db, key_id)
    if not revoked:
        print(f"cortex-workers: no active key {key_id}", file=sys.stderr)
        return 1
    print(f"revoked key {key_id}; the API refuses it within seconds")
    return 0


def add_commands(
    sub: argparse._SubParsersAction[argparse.ArgumentParser],
    keys_sub: argparse._SubParsersAction[argparse.ArgumentParser],
    add_data_dir: Callable[[argparse.ArgumentParser], None],
) -> None:
    """`tenants …` under `sub`, `keys list|revoke` under `keys_sub`."""
    tenants = sub.add_parser("tenants", help="tenants and their limits")
    tenants_sub = tenants.add_subparsers(dest="tenants_command", required=True)
    for name, func, text in (
        ("create", cmd_tenants_create, "create a tenant"),
        ("set", cmd_tenants_set, "change a tenant's limits or mode"),
    ):
        p = tenants_sub.add_parser(name, help=text)
        p.add_argument("name")
        add_override_flags(p)
        add_data_dir(p)
        p.set_defaults(func=func)
    listing = tenants_sub.add_parser("list", help="tenants with their limits")
    add_data_dir(listing)
    listing.set_defaults(func=cmd_tenants_list)

    keys = keys_sub.add_parser("list", help="keys: id, tenant, prefix, created, last used")
    keys.add_argument("--tenant")
    add_data_dir(keys)
    keys.set_defaults(func=cmd_keys_list)
    revoke = keys_sub.add_parser("revoke", help="revoke a key (refused within seconds)")
    revoke.add_argument("id")
    add_data_dir(revoke)
    revoke.set_defaults(func=cmd_keys_revoke)
