# Sourced by scripts/dev and scripts/test: make .venv hold this project with the given extras.
# Re-installs only when pyproject.toml (or the extras) changed since the last install.
ensure_venv() {
  local extras="$1" py="${PYTHON:-python3}" stamp want
  if [ ! -x .venv/bin/python ]; then
    "$py" -m venv .venv
    .venv/bin/python -m pip install -q --upgrade pip
  fi
  stamp=.venv/.cortex-installed
  want="$(sha256sum pyproject.toml | cut -d' ' -f1) $extras"
  if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    echo "installing cortex-workers${extras:+[$extras]} into .venv ..." >&2
    .venv/bin/python -m pip install -q -e ".${extras:+[$extras]}"
    echo "$want" > "$stamp"
  fi
}
