// Emscripten JS library of the relaxed builds: satisfies the import that stands for
// f32x4.relaxed_madd (src/kernels/relaxed_madd.h). scripts/relax-wasm.mjs replaces every call to it
// with the instruction after linking, so it is never called. In a build that skipped that step,
// V8 throws "type incompatibility when transforming from/to JS" (v128 arguments) before the body
// runs; the body is for engines that would not.
mergeInto(LibraryManager.library, {
  attention_relaxed_madd_f32x4: function () {
    abort('attention_relaxed_madd_f32x4 was called: this relaxed build skipped scripts/relax-wasm.mjs');
  },
});
