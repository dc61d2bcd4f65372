// require('attention-wasm') from CommonJS. The package is an ES module (its wasm loads
// asynchronously, through init()); rather than Node's ERR_PACKAGE_PATH_NOT_EXPORTED, say how to
// load it.
throw new Error(
  "attention-wasm is ESM only: use import(), e.g. const { init } = await import('attention-wasm'), " +
    'or import { init } from an ES module.',
);
