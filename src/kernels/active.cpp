#include "kernels.h"

namespace attn::kernels {

const KernelSet& active_kernels() {
#if defined(__wasm_simd128__)
  return kWasmSimdKernels;
#else
  return kScalarKernels;
#endif
}

}  // namespace attn::kernels
