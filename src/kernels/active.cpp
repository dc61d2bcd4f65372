#include "kernels.h"

namespace attn::kernels {

const KernelSet& active_kernels() {
#if defined(ATTENTION_HAS_SIMD128_KERNELS)
  return kWasmSimdKernels;
#else
  return kScalarKernels;
#endif
}

std::vector<const KernelSet*> compiled_kernel_sets() {
#if defined(ATTENTION_HAS_SIMD128_KERNELS)
  return {&kScalarKernels, &kWasmSimdKernels};
#else
  return {&kScalarKernels};
#endif
}

}  // namespace attn::kernels
