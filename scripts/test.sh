#!/usr/bin/env bash
# `npm test`: set-up, incremental build, then every suite. Catch2 runs natively, under ASan+UBSan
# and as wasm under Node; the Node runner goes last so its summary closes the output.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh
bash scripts/build.sh all

# Prints a runner's summary when it passes, its whole report when it fails.
catch2() {
  local label=$1 log
  shift
  log=$(mktemp)
  echo "# Catch2 ($label)"
  if "$@" --use-colour no >"$log" 2>&1; then
    tail -n 2 "$log"
  else
    cat "$log"
    exit 1
  fi
}
catch2 native build/native/attention_tests
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
  catch2 "native, ASan+UBSan" build/native/attention_tests_sanitized
catch2 "wasm SIMD under Node" node build/wasm/attention_tests_wasm.js

node --test --test-concurrency=1 tests/js/ tests/browser/
