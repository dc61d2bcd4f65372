#!/usr/bin/env bash
# `npm run fuzz [-- SECONDS]`: builds the libFuzzer target (clang, ASan+UBSan) and runs it for
# SECONDS (default 600) from the committed corpus. New inputs go to build/fuzz/corpus; a crash
# writes build/fuzz/crash-* and fails. Not part of `npm test`.
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-600}

if ! command -v clang++ >/dev/null 2>&1 || ! ls /usr/lib/llvm-*/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "fuzz: needs clang and libFuzzer: apt-get install -y clang libclang-rt-14-dev" >&2
    exit 1
  fi
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
fi
[ -f build/fuzz/CMakeCache.txt ] ||
  CXX=clang++ cmake -S . -B build/fuzz -DATTENTION_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/fuzz -j "$(nproc)" >/dev/null
mkdir -p build/fuzz/corpus
log=build/fuzz/fuzz.log
status=0
build/fuzz/fuzz_attention -max_total_time="$seconds" -max_len=512 -print_final_stats=1 \
  -artifact_prefix=build/fuzz/ build/fuzz/corpus tests/fuzz/corpus >"$log" 2>&1 || status=$?
runs=$(grep -o "stat::number_of_executed_units: *[0-9]*" "$log" | grep -o "[0-9]*$" || echo "?")
crashes=$(find build/fuzz -maxdepth 1 \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' \) | wc -l)
echo "fuzz: ${seconds} s, ${runs} executions, ${crashes} crashes (log: $log)"
if [ "$status" -ne 0 ] || [ "$crashes" -ne 0 ]; then
  grep -m1 -A20 -E "ERROR|runtime error" "$log" >&2 || tail -n 20 "$log" >&2
  exit 1
fi
