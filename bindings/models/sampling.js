// The next token from a row of logits, as transformers' generate chooses it: greedy (the first
// largest, as torch.argmax), or sampled after its logits processors in their order: temperature,
// top-k, top-p (generation/logits_process.py: TemperatureLogitsWarper, TopKLogitsWarper,
// TopPLogitsWarper), then a draw from the softmax.
import { checkBoolean, checkNumber } from '../validate.js';

/** generate()'s sampling options checked: { doSample, temperature, topK, topP, random }. */
export function checkSampling(opts) {
  const doSample = checkBoolean(opts.doSample, 'doSample', false);
  const temperature = checkNumber(opts.temperature ?? 1, 'temperature', { min: Number.MIN_VALUE });
  // HF's GenerationConfig default top_k is 50; 0 turns it off.
  const topK = checkNumber(opts.topK ?? 50, 'topK', { min: 0, max: 2 ** 31 - 1, integer: true });
  const topP = checkNumber(opts.topP ?? 1, 'topP', { min: 0, max: 1 });
  const random = opts.seed === undefined ? Math.random : seeded(checkNumber(opts.seed, 'seed', { min: 0, max: 2 ** 32 - 1, integer: true }));
  return { doSample, temperature, topK, topP, random };
}

// splitmix32: a small, well-mixed generator, so that a seed gives the same text everywhere.
function seeded(seed) {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x9e3779b9) >>> 0;
    let z = state;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return ((z ^ (z >>> 16)) >>> 0) / 2 ** 32;
  };
}

function argmax(logits) {
  let best = 0;
  for (let i = 1; i < logits.length; i++) if (logits[i] > logits[best]) best = i;
  return best;
}

/** The next id from `logits` (one row) as `sampling` (checkSampling's) says. */
export function sampleNext(logits, { doSample, temperature, topK, topP, random }) {
  if (!doSample) return argmax(logits);
  const scores = Float64Array.from(logits, (v) => v / temperature);
  const order = Array.from(scores.keys()).sort((a, b) => scores[b] - scores[a] || a - b);
  // top-k keeps the k largest (and any tied with the k-th, as torch.topk's threshold does).
  let kept = topK > 0 && topK < order.length ? order.filter((id) => scores[id] >= scores[order[topK - 1]]) : order;
  if (topP < 1) {
    // top-p keeps the smallest set of the largest whose probability reaches topP (at least one).
    const max = scores[kept[0]];
    const weights = kept.map((id) => Math.exp(scores[id] - max));
    const total = weights.reduce((a, b) => a + b, 0);
    let mass = 0, count = 0;
    while (count < kept.length && mass < topP * total) mass += weights[count++];
    kept = kept.slice(0, Math.max(count, 1));
  }
  const max = scores[kept[0]];
  const weights = kept.map((id) => Math.exp(scores[id] - max));
  let draw = random() * weights.reduce((a, b) => a + b, 0);
  for (let i = 0; i < kept.length; i++) {
    draw -= weights[i];
    if (draw < 0) return kept[i];
  }
  return kept[kept.length - 1];
}
