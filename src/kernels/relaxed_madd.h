// f32x4.relaxed_madd(a, b, c) = a · b + c, fused where the CPU has FMA (Chrome >= 114, Node >= 22;
// Node 20 behind --experimental-wasm-relaxed-simd). The clang of Debian's Emscripten 3.1.6 knows
// only the pre-standard opcode, which no shipping engine accepts. So the relaxed builds call this
// function instead: it links as an import (bindings/relaxed_simd.js) with the instruction's exact
// stack signature, and scripts/relax-wasm.mjs replaces every call with the instruction.
// `const` tells the compiler it is pure (no memory effects), so loads and stores move across it
// as across arithmetic; it still counts as a call in the inliner's and unroller's costs.
#pragma once

#include <wasm_simd128.h>

extern "C" __attribute__((const)) v128_t attention_relaxed_madd_f32x4(v128_t a, v128_t b, v128_t c);
