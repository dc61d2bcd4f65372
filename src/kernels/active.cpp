#include "kernels.h"

namespace attn::kernels {

namespace {
const KernelSet* overridden = nullptr;
}

const KernelSet& active_kernels() {
  if (overridden) return *overridden;
#if defined(ATTENTION_HAS_SIMD128_KERNELS)
  return kWasmSimdKernels;
#else
  return kScalarKernels;
#endif
}

void override_active_kernels(const KernelSet* set) { overridden = set; }

std::vector<const KernelSet*> compiled_kernel_sets() {
#if defined(ATTENTION_HAS_SIMD128_KERNELS)
  return {&kScalarKernels, &kWasmSimdKernels};
#else
  return {&kScalarKernels};
#endif
}

}  // namespace attn::kernels
