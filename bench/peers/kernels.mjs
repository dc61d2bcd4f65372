// simd128-peak, ours-gemm and ours-gemm-loop: kernel figures measured inside wasm by build/wasm/bench-kernels
// (bench/kernels_wasm.cpp), an Emscripten ES module built for web/worker, loaded here from its bytes.
import { readFile } from 'node:fs/promises';

// `name`: 'bench-kernels', or 'bench-kernels-relaxed' (the kernels of the relaxed builds).
export async function loadKernels(name = 'bench-kernels') {
  const { default: create } = await import(new URL(`../../build/wasm/${name}.mjs`, import.meta.url).href);
  const m = await create({ wasmBinary: await readFile(new URL(`../../build/wasm/${name}.wasm`, import.meta.url)) });
  return {
    /**
     * f32x4 multiply and add chains; the iterations are sized so one call runs ~`targetMs`, the
     * best of `tries` after warm-up calls (V8 first runs a function unoptimized, Liftoff).
     */
    simd128PeakGflops(targetMs = 500, tries = 3) {
      const probe = 1e7;
      m.simd128PeakGflops(probe);
      const start = performance.now();
      m.simd128PeakGflops(probe);
      const iterations = Math.max(probe, Math.round((probe * targetMs) / (performance.now() - start)));
      let best = 0;
      for (let i = 0; i < tries; ++i) best = Math.max(best, m.simd128PeakGflops(iterations));
      return { gflops: best, iterations };
    },
    /**
     * Single-threaded packed GEMM, best of `repeats`. V8 runs a wasm function in Liftoff until it
     * has been called often enough to tier up, and one 1024³ call is a single call: small calls
     * warm it up first, so the figure is the optimised code's (as in any longer-running page).
     */
    gemmGflops(M, N, K, repeats = 5) {
      for (let i = 0; i < 30; i++) m.gemmGflops(64, 64, 64, 3);
      m.gemmGflops(M, N, K, 1);
      return m.gemmGflops(M, N, K, repeats);
    },
    /**
     * The GEMM kernel and copies of its inner loop with loads taken out (bench/kernels_wasm.cpp),
     * on one score tile, in turns, best of `rounds`. A first, untimed call lets V8 tier the loops
     * up: a call already running stays on the baseline code.
     */
    gemmLoopGflops(rounds = 50, calls = 200) {
      m.gemmLoopGflops(rounds, calls);
      return m.gemmLoopGflops(rounds, calls);
    },
    /**
     * A decode kernel ('gemm_nt', 'gemm_nt_f16', 'gemm_nn_add', 'gemm_nn_add_f16', 'gemm_nt_q8',
     * 'gemm_nn_add_q8') on one chunk in L1 (M query heads, N, K as kernels.h names them), after a
     * warm-up that tiers it up.
     */
    decodeKernelGflops(kernel, M, N, K, calls = 2000, repeats = 7) {
      const kind = ['gemm_nt', 'gemm_nt_f16', 'gemm_nn_add', 'gemm_nn_add_f16', 'gemm_nt_q8', 'gemm_nn_add_q8'].indexOf(kernel);
      m.decodeKernelGflops(kind, M, N, K, calls, 3);
      return m.decodeKernelGflops(kind, M, N, K, calls, repeats);
    },
    /**
     * 'widen_f16' or 'widen_bf16' on `n` 16-bit weights (a Linear's chunk of 64 outputs of 576
     * inputs: 36864), in G elements/s, after a warm-up that tiers it up.
     */
    widenRate(kernel, n = 36864, calls = 200, repeats = 7) {
      const bf16 = kernel === 'widen_bf16';
      m.widenRate(bf16, n, calls, 3);
      return m.widenRate(bf16, n, calls, repeats);
    },
    /**
     * The rope kernel at one position over `rows` heads of 2·half dims (Llama-3.2-1B's decode
     * step: 40 heads, half 32), rotate-half or interleaved, in G elements/s, after a warm-up.
     */
    ropeRate({ interleaved = false, rows = 40, half = 32 } = {}, calls = 2000, repeats = 7) {
      m.ropeRate(interleaved, rows, half, calls, 3);
      return m.ropeRate(interleaved, rows, half, calls, repeats);
    },
    /**
     * The activate kernel ('silu', 'gelu' or 'gelu_tanh', times a multiplier when gated) on one
     * row of a Llama-3.2-1B-shaped MLP (n = 8192), in G elements/s, after a warm-up.
     */
    activateRate(activation, { gated = true, n = 8192 } = {}, calls = 500, repeats = 7) {
      const act = ['silu', 'gelu', 'gelu_tanh'].indexOf(activation);
      m.activateRate(act, gated, n, calls, 3);
      return m.activateRate(act, gated, n, calls, repeats);
    },
  };
}
