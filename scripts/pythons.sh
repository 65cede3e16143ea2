#!/usr/bin/env bash
# `make test-pythons`: install the package on the oldest Python it supports (3.10, pyproject's requires-python) and
# on the newest Python this machine has, each in a fresh venv (.venv-py3.X) with the core test tools, and run the
# fast suite there (tests of an extra this venv lacks skip). Either one not installing or failing fails the run.
# Interpreters are looked for on PATH, under pyenv (~/.pyenv/versions) and in /usr/bin; `uv python install` would
# download them from outside the package registries, which this project's machines cannot reach, so it is not used.
# Exits non-zero when 3.10 is not found.
set -uo pipefail
cd "$(dirname "$0")/.."

# every interpreter found: "MAJOR.MINOR PATH", one per line
found() {
  local c
  for c in $(compgen -c python3. 2>/dev/null | sort -u) "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.*/bin/python3 \
           /usr/bin/python3.*; do
    [[ "$c" == *-config ]] && continue
    local v
    v=$("$c" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) || continue
    local p
    p=$("$c" -c 'import sys; print(sys.executable)' 2>/dev/null) || continue
    echo "$v $p"
  done | sort -t. -k1,1n -k2,2n -u
}

all=$(found)
oldest=$(echo "$all" | awk '$1 == "3.10" {print $2; exit}')
newest=$(echo "$all" | tail -n 1 | awk '{print $2}')
echo "pythons: found $(echo "$all" | awk '{print $1}' | sort -u | tr '\n' ' ')"
if [ -z "$oldest" ]; then echo "pythons: Python 3.10 not found (PATH, pyenv, /usr/bin): cannot test the oldest supported Python"; exit 1; fi

status=0
for py in "$oldest" "$newest"; do
  v=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  venv=".venv-py$v"
  echo "pythons: Python $v ($py) in $venv"
  t0=$SECONDS
  rm -rf "$venv"
  if ! { "$py" -m venv "$venv" && "$venv/bin/python" -m pip install -q --disable-pip-version-check \
          -e ".[test-core,learn]" > "$venv.install.log" 2>&1; }; then
    # requires-python promises this Python: a dependency without a release for it is a failure, as a test is
    echo "pythons: FAILED: the package does not install on Python $v: $(grep -m1 'No matching distribution' "$venv.install.log" || tail -n 1 "$venv.install.log") (log: $venv.install.log)"
    status=1
    [ "$py" = "$newest" ] && break
    continue
  fi
  PYTHONDONTWRITEBYTECODE= "$venv/bin/python" -m pytest -q -x -p no:cacheprovider -n auto --dist loadfile
  code=$?
  echo "pythons: Python $v: pytest exit $code in $((SECONDS - t0)) s"
  [ "$code" = 0 ] || status=1
  [ "$py" = "$newest" ] && break
  [ "$oldest" = "$newest" ] && break
done
exit $status
