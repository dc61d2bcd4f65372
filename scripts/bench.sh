#!/usr/bin/env bash
# `npm run bench [-- --large] [-- --json FILE] [-- --quick]`: the benchmark of bench/attention.mjs (issue #6).
# Checks the system packages, builds everything (the native core is one of the rows, the bench
# kernels come from the wasm build), installs the peers into bench/node_modules on first use, then
# runs the bench with this script's arguments. BENCH_NO_BUILD=1 skips the build (already built).
# The working directory is left alone, so relative paths such as `--json out.json` mean what they say.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"

bash "$root/scripts/setup.sh"
if [ "${BENCH_NO_BUILD:-0}" != 1 ]; then
  bash "$root/scripts/build.sh" all
fi
# The peers (onnxruntime-web, tfjs) are pinned in bench/package-lock.json, apart from the package's.
# npm writes node_modules/.package-lock.json last, so its presence means a finished install; benches
# started at once (npm test runs modes side by side) take turns on a lock and install once.
peers_installed() { [ -f "$root/bench/node_modules/.package-lock.json" ]; }
if ! peers_installed; then
  (
    flock 9
    peers_installed || npm ci --prefix "$root/bench" --no-audit --no-fund
  ) 9<"$root/bench/package-lock.json"
fi
# `--sdpa-options` first runs bench/sdpa-options.mjs (the v2 options: window, grouped heads, ALiBi,
# soft cap, documents) with the remaining arguments instead; `--decode` runs bench/decode.mjs (a
# decode step over f32, f16 and q8 KV caches against onnxruntime-web's GroupQueryAttention, the read
# rate and the same step built natively);
# `--linear` bench/linear.mjs (attn.Linear on a SmolLM2-shaped model's layers against our GEMM rate);
# `--model` bench/model.mjs (a SmolLM2-135M-shaped checkpoint's forward through openModel);
# `--open` bench/open.mjs (openModel and one forward on checkpoints of published models' shapes,
# against the read rate, our Linear's rate and onnxruntime-web); `--page` bench/page.mjs (the demo
# page's update at 2048 characters in Chromium, and its long tasks; `--page --model FOLDER | NAME`:
# a checkpoint folder, or one of bench/open.mjs's shapes written for the run, opened in the viewer,
# timed to its first layer's cells and its whole grid at 200 words and 2048 tokens, with the
# renderer's memory and the roofline). Every mode takes `--quick` (its smallest sizes, a few
# seconds; --page's: one round per thread count at 640 characters; --page --model's: 2 layers):
# tests/js/bench-smoke.test.js runs them.
script="$root/bench/attention.mjs"
case "${1:-}" in
  --sdpa-options) script="$root/bench/sdpa-options.mjs"; shift ;;
  --decode) script="$root/bench/decode.mjs"; shift ;;
  --linear) script="$root/bench/linear.mjs"; shift ;;
  --model) script="$root/bench/model.mjs"; shift ;;
  --open) script="$root/bench/open.mjs"; shift ;;
  --page) script="$root/bench/page.mjs"; shift ;;
esac
# Node 20 runs relaxed SIMD (the ours-relaxed rows) only behind this flag; the peers are unaffected.
exec node --experimental-wasm-relaxed-simd "$script" "$@"
