// Emscripten 3.1.6's Node code path expects CommonJS `require` and `__dirname`, which ES modules
// lack. The ESM loader passes them in as module options; a pthread worker already has `require`
// from its own CommonJS shim. Browsers never reach the code that uses them.
var require = Module['nodeRequire'] || (typeof globalThis.require == 'function' ? globalThis.require : undefined);
var __dirname = Module['nodeDirname'];
