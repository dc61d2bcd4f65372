// Seeded random numbers for test data and benchmarks: the same inputs on every run and machine.
// (The demo page has its own generator, web/embeddings.js: its seeded weights are part of the page.)

/** splitmix32: a seeded generator of uniform numbers in [0, 1). */
export function rng(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x21f0aaad);
    z = Math.imul(z ^ (z >>> 15), 0x735a2d97);
    return ((z ^ (z >>> 15)) >>> 0) / 4294967296;
  };
}
