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
# Node 20 runs relaxed SIMD only behind this flag (Chrome >= 114 and Node >= 22 by default).
catch2 "wasm relaxed SIMD under Node" node --experimental-wasm-relaxed-simd build/wasm/attention_tests_wasm_relaxed.js
# The kernel micro-benchmarks still build and run (one short pass; figures are for npm run bench:kernels).
echo "# kernel micro-benchmarks (smoke run)"
build/native/attention_bench_kernels --benchmark_min_time=0.001 --benchmark_format=json \
  >build/bench-kernels-smoke.json 2>build/bench-kernels-smoke.log || { cat build/bench-kernels-smoke.log; exit 1; }
node -e '
const { benchmarks } = JSON.parse(require("fs").readFileSync("build/bench-kernels-smoke.json", "utf8"));
const families = new Set(benchmarks.map((b) => b.name.split("/")[0]));
console.log(`${benchmarks.length} benchmarks over ${[...families].join(", ")}`);'

node --test --test-concurrency=1 tests/js/ tests/browser/
