#!/usr/bin/env bash
# Installs what the build and tests need, when missing: the npm dev dependencies, then the Debian
# packages. Idempotent and silent when everything is there; as root it installs Debian packages,
# otherwise it says what to install and fails.
# python3-torch: tests/js/examples.test.js runs the PyTorch export examples (and `npm run fixtures`
# regenerates the fixtures with it).
set -euo pipefail

# npm dev dependencies (esbuild, playwright-core, typescript, wasm-feature-detect): installed when
# node_modules is missing or older than package-lock.json.
cd "$(dirname "$0")/.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm dev dependencies (npm ci)..."
  npm ci --no-audit --no-fund --loglevel=error
fi

missing=()
command -v em++ >/dev/null 2>&1 || missing+=(emscripten)
[ -f /usr/include/catch2/catch.hpp ] || missing+=(catch2)
[ -f /usr/include/nlohmann/json.hpp ] || missing+=(nlohmann-json3-dev)
[ -f /usr/include/simde/wasm/simd128.h ] || missing+=(libsimde-dev)
[ -f /usr/include/benchmark/benchmark.h ] || missing+=(libbenchmark-dev)
command -v chromium >/dev/null 2>&1 || missing+=(chromium)
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
command -v wat2wasm >/dev/null 2>&1 || missing+=(wabt)
command -v g++ >/dev/null 2>&1 || missing+=(g++)
# Where Debian installs it for /usr/bin/python3 (importing torch would take seconds at every run).
[ -f /usr/lib/python3/dist-packages/torch/__init__.py ] || missing+=(python3-torch)
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  echo "setup: missing Debian packages: ${missing[*]}" >&2
  echo "setup: install them as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "setup: installing ${missing[*]} (Debian packages)..."
export DEBIAN_FRONTEND=noninteractive
log=$(mktemp)
if ! { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; } >"$log" 2>&1; then
  tail -n 30 "$log" >&2
  echo "setup: apt-get failed installing ${missing[*]}" >&2
  exit 1
fi
rm -f "$log"
echo "setup: done"
