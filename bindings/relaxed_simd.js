// Emscripten JS library of the relaxed builds: satisfies the import that stands for
// f32x4.relaxed_madd (src/kernels/relaxed_madd.h). scripts/relax-wasm.mjs replaces every call to it
// with the instruction after linking, so this body runs only if that step was skipped.
mergeInto(LibraryManager.library, {
  attention_relaxed_madd_f32x4: function () {
    abort('attention_relaxed_madd_f32x4 was called: this relaxed build skipped scripts/relax-wasm.mjs');
  },
});
