# Sourced by scripts/dev and scripts/test: make $VENV (default .venv, or $CORTEX_VENV) hold this
# project with the given extras. Re-installs only when pyproject.toml or the extras changed.
VENV="${CORTEX_VENV:-.venv}"
ensure_venv() {
  local extras="$1" py="${PYTHON:-python3}" stamp want
  if [ ! -x "$VENV/bin/python" ]; then
    "$py" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
  fi
  stamp="$VENV/.cortex-installed"
  want="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "installing cortex-workers${extras:+[$extras]} into $VENV ..." >&2
    "$VENV/bin/python" -m pip install -q -e ".${extras:+[$extras]}"
    echo "$want" > "$stamp"
  fi
}
