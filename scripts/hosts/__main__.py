"""`python -m scripts.hosts run|failover|cleanup` (as root): the multi-host scenario, the
Sentinel failover, or removing namespaces a killed run left (see docs/fleet.md).

Exit code: 0 when the run found nothing lost, duplicated or out of order, 1 otherwise, 2 when
namespaces cannot be made here."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from .network import remove_stale, unavailable_reason
from .scenarios import problems, run_failover, run_hosts, without_primary


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scripts.hosts", description=__doc__)
    parser.add_argument("command", choices=["run", "failover", "cleanup"])
    parser.add_argument("--sessions", type=int)
    parser.add_argument("--turns", type=int)
    parser.add_argument("--seed", type=int, default=33)
    parser.add_argument("--json", type=Path, help="write the report here")
    args = parser.parse_args(argv)
    if args.command == "cleanup":
        print("\n".join(remove_stale()) or "nothing to remove")
        return 0
    if args.command == "run":
        if reason := unavailable_reason():
            print(f"network namespaces unavailable: {reason}", file=sys.stderr)
            return 2
        report = run_hosts(sessions=args.sessions or 6, turns=args.turns or 5, seed=args.seed)
    else:
        report = run_failover(
            sessions=args.sessions or 20, turns=args.turns or 1, seed=args.seed,
            after=without_primary,
        )  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(report, indent=1, default=str))
    found = problems(report)
    print(json.dumps({"problems": found, "after": report.get("after")}, default=str))
    return 0 if not found else 1


if __name__ == "__main__":
    sys.exit(main())
