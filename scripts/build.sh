#!/usr/bin/env bash
# Incremental build. `build.sh wasm`: the five wasm builds and the ESM bundle in dist/ (what the
# package and the demo need). `build.sh all`: also the native core and the Catch2 runners.
set -euo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}

# Debian's emscripten finds acorn only through NODE_PATH (CONTRIBUTING.md, toolchain pitfall 1).
export NODE_PATH=/usr/share/nodejs
jobs=$(nproc)

# Build output goes to a log, shown only when a step fails.
run() {
  local log="build/$1.log"
  shift
  mkdir -p build
  if ! "$@" >"$log" 2>&1; then
    grep -E "error|Error|FAILED" "$log" | head -n 40 >&2 || tail -n 40 "$log" >&2
    echo "build: failed: $* (full log: $log)" >&2
    exit 1
  fi
}

[ -f build/wasm/CMakeCache.txt ] || run configure-wasm emcmake cmake -S . -B build/wasm -DCMAKE_BUILD_TYPE=Release
if [ "$what" = all ]; then
  [ -f build/native/CMakeCache.txt ] || run configure-native cmake -S . -B build/native -DCMAKE_BUILD_TYPE=Release
  run native cmake --build build/native -j "$jobs"
  run wasm cmake --build build/wasm -j "$jobs"
else
  run wasm cmake --build build/wasm -j "$jobs" --target attention-simd attention-relaxed attention-scalar attention-threads attention-threads-relaxed
fi
# The pthread worker emscripten writes is CommonJS, while the package is "type": "module".
echo '{ "type": "commonjs" }' > dist/package.json
run bundle node scripts/bundle.mjs
