"""The import layers of DESIGN.md hold: import-linter keeps every contract in pyproject.toml."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LINT_IMPORTS = Path(sys.executable).parent / "lint-imports"


def test_pyproject_declares_the_layer_and_framework_contracts() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    kinds = {c["type"] for c in config["contracts"]}
    assert {"layers", "forbidden"} <= kinds
    forbidden = next(c for c in config["contracts"] if c["type"] == "forbidden")
    assert {"celery", "fastapi"} <= set(forbidden["forbidden_modules"])


def test_imports_flow_one_way_and_no_framework_is_imported_below_dispatch() -> None:
    assert LINT_IMPORTS.exists(), f"{LINT_IMPORTS} missing: install import-linter in the venv"
    proc = subprocess.run(
        [str(LINT_IMPORTS), "--no-cache", "--no-logo"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = proc.stdout + proc.stderr
    flat = " ".join(output.split())  # the report wraps long contract names
    assert proc.returncode == 0, output
    assert "broken" not in output.lower().replace("0 broken", ""), output
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    n = len(config["contracts"])
    assert f"Contracts: {n} kept, 0 broken." in flat, output
    for contract in config["contracts"]:
        assert f"{' '.join(contract['name'].split())} KEPT" in flat, output
