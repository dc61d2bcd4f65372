// NaN and Infinity in the data are not errors: they spread as through PyTorch's formula,
// softmax(scale · q·kᵀ + mask) · v, a boolean mask added as −∞ where it hides, so masks do not stop
// them (NaN + (−∞) is NaN, 0 · NaN is NaN); what the engine skips spreads nothing (docs/api.md,
// "Behaviour every function shares": the rule, with the groups of 32 queries, the blocks of 128
// keys and the decode path's chunks). `expectedNaN` below is that rule written out; random calls
// must match it on every path, and each kind of mask is checked on its own after it.
import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { init } from 'attention-wasm';
import { rng } from './random.js';

let attn;
before(async () => {
  attn = await init();
});
after(() => attn.dispose());

const tensor = (shape, f) => ({ shape, data: Float32Array.from({ length: shape.reduce((a, b) => a * b, 1) }, (_, i) => f(i)) });

/** The rows of `data` ([rows, width]) that hold a NaN; every other row must be finite. */
function nanRows(data, width) {
  const rows = [];
  for (let r = 0; r < data.length / width; r++) {
    const row = data.subarray(r * width, (r + 1) * width);
    if (row.some(Number.isNaN)) rows.push(r);
    else assert.ok(row.every(Number.isFinite), `row ${r} is finite or NaN`);
  }
  return rows;
}

// The engine's units, as docs/api.md states them.
const GROUP = 32; // queries whose values are multiplied together
const BLOCK = 128; // keys per block without weights (the decode path's chunks: up to 128)
const PANEL = 8; // a group's value range starts at a multiple of 8 (not in the decode path)
const DECODE_ROWS = 16; // at most this many queries per key/value head, without weights: the decode path

/**
 * The documented rule: which of n queries come out NaN, for a NaN in query, key or value `index`.
 * `causal` (false, true or 'lowerRight') and `window` are the position rules; `sees(i, j)` the
 * masks (tensors and documents); `ids` the document ids; `path` 'weights', 'stream' or 'decode'.
 */
function expectedNaN({ n, m, causal, window, sees, ids, bad, index, path }) {
  const offset = causal === 'lowerRight' ? m - n : 0;
  // The keys the position rules leave query i: [begin, end).
  const range = (i) => {
    const p = i + offset;
    let begin = 0;
    let end = m;
    if (window) [begin, end] = [Math.max(begin, p - window + 1), Math.min(end, p + window)];
    if (causal) end = Math.min(end, p + 1);
    begin = Math.min(begin, m);
    return [begin, Math.max(begin, end)];
  };
  const visible = (i, j) => j >= range(i)[0] && j < range(i)[1] && sees(i, j);
  const seesAny = (i, [j0, j1]) => Array.from({ length: j1 - j0 }, (_, k) => j0 + k).some((j) => visible(i, j));
  const groupOf = (i) => (path === 'decode' ? [0, n] : [Math.floor(i / GROUP) * GROUP, Math.min(n, (Math.floor(i / GROUP) + 1) * GROUP)]);
  // The keys the rules leave any query of a group: from the first one's begin to the last one's end.
  const reach = ([g0, g1]) => [range(g0)[0], range(g1 - 1)[1]];
  const blockOf = (j) => {
    const start = path === 'decode' ? reach([0, n])[0] : 0;
    const k = Math.floor((j - start) / BLOCK);
    return [start + k * BLOCK, Math.min(m, start + (k + 1) * BLOCK)];
  };
  // Without weights (and not in the decode path), a block the rules or the documents hide from the whole group.
  const skipped = (group, [j0, j1]) => {
    if (path !== 'stream') return false;
    const [r0, r1] = reach(group);
    if (Math.max(r0, j0) >= Math.min(r1, j1)) return true;
    if (!ids) return false;
    const queryIds = ids.slice(...group);
    const keyIds = ids.slice(j0, j1);
    return Math.max(...queryIds) < Math.min(...keyIds) || Math.max(...keyIds) < Math.min(...queryIds);
  };
  const rows = [];
  for (let i = 0; i < n; i++) {
    if (!seesAny(i, [0, m])) continue; // zeros
    let nan;
    if (bad === 'query') nan = i === index;
    else if (bad === 'key') {
      const [begin, end] = range(i);
      const block = blockOf(index);
      nan = index >= begin && index < end && (path === 'weights' || (seesAny(i, block) && !skipped(groupOf(i), block)));
    } else {
      const group = groupOf(i);
      let [r0, r1] = reach(group);
      if (path !== 'decode') r0 = Math.floor(r0 / PANEL) * PANEL;
      nan = index >= r0 && index < r1 && !skipped(group, blockOf(index));
    }
    if (nan) rows.push(i);
  }
  return rows;
}

/** SDPA over query [n, 3], key [m, 3], value [m, 2] with a NaN in row `index` of `bad`: the NaN rows. */
function sdpaNaN({ n, m, causal = false, window = 0, attnMask, ids, bad, index, path }) {
  const input = (rows, cols, name) =>
    tensor([rows, cols], (x) => (name === bad && Math.floor(x / cols) === index ? NaN : Math.sin(x + 7 * cols)));
  const opts = { isCausal: causal, needWeights: path === 'weights' };
  if (window) opts.window = window;
  if (attnMask) opts.attnMask = attnMask;
  if (ids) opts.documentIds = { data: Int32Array.from(ids), shape: [n] };
  const { output } = attn.scaledDotProductAttention(input(n, 3, 'query'), input(m, 3, 'key'), input(m, 2, 'value'), opts);
  return nanRows(output.data, 2);
}

test('the documented rule, on 2000 random calls: every path, rule, mask and place of the NaN', () => {
  const random = rng(35);
  const pick = (xs) => xs[Math.floor(random() * xs.length)];
  const paths = { weights: 0, stream: 0, decode: 0 };
  for (let trial = 0; trial < 2000; trial++) {
    const path = pick(['weights', 'stream', 'decode']);
    const n = path === 'decode' ? 1 + Math.floor(random() * DECODE_ROWS) : path === 'stream' ? DECODE_ROWS + 1 + Math.floor(random() * 100) : 1 + Math.floor(random() * 100);
    let m = 1 + Math.floor(random() * 400);
    const documents = path !== 'decode' && random() < 0.2;
    if (documents) m = n; // documentIds needs n == m
    const causal = pick([false, true, 'lowerRight']);
    if (causal === 'lowerRight' && m < n) m = n;
    const window = random() < 0.3 ? 1 + Math.floor(random() * 20) : 0;
    const maskKind = pick(['none', 'boolean', 'additive', 'finite']);
    const density = random();
    const allowed = Uint8Array.from({ length: n * m }, () => (random() < density ? 1 : 0));
    let attnMask;
    let sees = () => true;
    if (maskKind === 'boolean') attnMask = { shape: [n, m], data: allowed };
    if (maskKind === 'additive') attnMask = { shape: [n, m], data: Float32Array.from(allowed, (a) => (a ? 0.5 : -Infinity)) };
    // A finite value, however negative, is a score like any other: it hides nothing.
    if (maskKind === 'finite') attnMask = { shape: [n, m], data: Float32Array.from(allowed, (a) => (a ? 0.5 : -1e30)) };
    if (maskKind === 'boolean' || maskKind === 'additive') sees = (i, j) => allowed[i * m + j] === 1;
    let ids;
    if (documents) {
      const cut = Math.floor(random() * n);
      ids = Array.from({ length: n }, (_, i) => (i < cut ? 0 : 1));
      const masked = sees;
      sees = (i, j) => masked(i, j) && ids[i] === ids[j];
    }
    const bad = pick(['query', 'key', 'value']);
    const index = Math.floor(random() * (bad === 'query' ? n : m));
    const call = { n, m, causal, window, attnMask, sees, ids, bad, index, path };
    assert.deepEqual(sdpaNaN(call), expectedNaN(call), JSON.stringify({ ...call, attnMask: maskKind, sees: undefined, ids: ids && `cut at ${ids.indexOf(1)}` }));
    paths[path]++;
  }
  assert.ok(Object.values(paths).every((count) => count > 500), JSON.stringify(paths));
});

describe('each kind of mask, in scaledDotProductAttention (4 queries, 6 keys; with and without weights)', () => {
  const n = 4;
  const m = 6;
  const all = [0, 1, 2, 3];
  // Query 0 may not attend to key 2; everything else may.
  const allowed = Uint8Array.from({ length: n * m }, (_, x) => (x === 2 ? 0 : 1));
  const cases = [
    // A mask adds −∞ to the score: a NaN key or value still reaches the query it hides.
    { name: 'boolean attnMask (1 = may attend)', opts: { attnMask: { shape: [n, m], data: allowed } }, key: all, value: all },
    { name: 'additive attnMask (−Infinity)', opts: { attnMask: { shape: [n, m], data: Float32Array.from(allowed, (a) => (a ? 0 : -Infinity)) } }, key: all, value: all },
    // Query i sees keys j ≤ i: key 2 is never scored for queries 0 and 1, but its value is
    // multiplied in for the four queries together (their keys 0–3).
    { name: 'isCausal: true', opts: { causal: true }, key: [2, 3], value: all },
    // The queries are the last 4 of 6 positions (2–5): each sees key 2.
    { name: "isCausal: 'lowerRight'", opts: { causal: 'lowerRight' }, key: all, value: all },
    // Query i sees keys i − 1 … i: key 2 reaches queries 2 and 3 only; values 0–3 are multiplied in.
    { name: 'window: 2 with isCausal', opts: { causal: true, window: 2 }, key: [2, 3], value: all },
    // Queries 0 and 1 may see nothing: zeros, whatever the keys hold.
    { name: 'every key hidden from queries 0 and 1', opts: { attnMask: { shape: [n, m], data: Uint8Array.from({ length: n * m }, (_, x) => (x < 2 * m ? 0 : 1)) } }, key: [2, 3], value: [2, 3] },
  ];
  for (const { name, opts, key, value } of cases) {
    test(name, () => {
      for (const path of ['weights', 'decode']) {
        assert.deepEqual(sdpaNaN({ n, m, ...opts, bad: 'key', index: 2, path }), key, `${path}: NaN key 2`);
        assert.deepEqual(sdpaNaN({ n, m, ...opts, bad: 'value', index: 2, path }), value, `${path}: NaN value 2`);
      }
    });
  }

  test('documentIds: a key of another document is masked, not skipped, within one block', () => {
    const ids = [0, 0, 0, 1, 1, 1];
    for (const path of ['weights', 'decode']) {
      assert.deepEqual(sdpaNaN({ n: 6, m: 6, ids, bad: 'key', index: 1, path }), [0, 1, 2, 3, 4, 5], path);
      assert.deepEqual(sdpaNaN({ n: 6, m: 6, ids, bad: 'value', index: 1, path }), [0, 1, 2, 3, 4, 5], path);
    }
  });
});

test('without weights, blocks of 128 keys hidden from a whole group of 32 queries are skipped', () => {
  // Two documents of 200 tokens, causal: a NaN key 5 (document 0) reaches every later query through
  // the weights; without them, queries 200 on see none of the keys 0–127, and skip that block.
  const ids = Array.from({ length: 400 }, (_, i) => (i < 200 ? 0 : 1));
  const from = (a, b) => Array.from({ length: b - a }, (_, k) => a + k);
  assert.deepEqual(sdpaNaN({ n: 400, m: 400, causal: true, ids, bad: 'key', index: 5, path: 'weights' }), from(5, 400));
  assert.deepEqual(sdpaNaN({ n: 400, m: 400, causal: true, ids, bad: 'key', index: 5, path: 'stream' }), from(5, 200));
  // Its value is multiplied in for the groups of 32 that reach keys 0–127: queries 0–223.
  assert.deepEqual(sdpaNaN({ n: 400, m: 400, causal: true, ids, bad: 'value', index: 5, path: 'stream' }), from(0, 224));
  // A boolean mask skips nothing: query 0 sees keys 128 on only, so it does not score block 0 (no
  // weights), though the mask alone hides key 5 from it.
  const allowed = Uint8Array.from({ length: 40 * 300 }, (_, x) => (x < 300 && x % 300 < 128 ? 0 : 1));
  const attnMask = { shape: [40, 300], data: allowed };
  assert.deepEqual(sdpaNaN({ n: 40, m: 300, attnMask, bad: 'key', index: 5, path: 'weights' }), from(0, 40));
  assert.deepEqual(sdpaNaN({ n: 40, m: 300, attnMask, bad: 'key', index: 5, path: 'stream' }), from(1, 40));
});

test('NaN in one query row makes that row NaN and leaves the others finite', () => {
  const q = tensor([3, 4], (i) => (i === 5 ? NaN : Math.sin(i)));
  const k = tensor([5, 4], (i) => Math.cos(i));
  const v = tensor([5, 2], (i) => i / 10);
  for (const needWeights of [true, false]) {
    const { output, weights } = attn.scaledDotProductAttention(q, k, v, { needWeights });
    assert.deepEqual(nanRows(output.data, 2), [1]);
    if (weights) assert.deepEqual(nanRows(weights.data, 5), [1]);
  }
});

test('Infinity in a value propagates: weights times Infinity', () => {
  const q = tensor([2, 3], (i) => Math.sin(i));
  const k = tensor([4, 3], (i) => Math.cos(i));
  const v = tensor([4, 1], (i) => (i === 2 ? Infinity : 1));
  const { output } = attn.scaledDotProductAttention(q, k, v);
  assert.deepEqual(Array.from(output.data), [Infinity, Infinity]);
  // A zero weight times Infinity is NaN, as in PyTorch: query 0 may not attend to key 2.
  const attnMask = { shape: [2, 4], data: Uint8Array.of(1, 1, 0, 1, 1, 1, 1, 1) };
  assert.deepEqual(Array.from(attn.scaledDotProductAttention(q, k, v, { attnMask }).output.data), [NaN, Infinity]);
});

test('a fully masked query outputs zeros even when its keys hold NaN; a query that sees the NaN is NaN', () => {
  const q = tensor([2, 3], (i) => Math.sin(i));
  const k = tensor([4, 3], (i) => (i < 3 ? NaN : Math.cos(i))); // key 0 is NaN
  const v = tensor([4, 2], (i) => (i < 2 ? NaN : 1)); // value 0 is NaN
  // SDPA polarity: 1 = may attend. Query 0 sees nothing; query 1 sees every key.
  const attnMask = { shape: [2, 4], data: Uint8Array.from([0, 0, 0, 0, 1, 1, 1, 1]) };
  for (const needWeights of [true, false]) {
    const { output, weights } = attn.scaledDotProductAttention(q, k, v, { attnMask, needWeights });
    assert.deepEqual(Array.from(output.data.slice(0, 2)), [0, 0]);
    assert.ok(output.data.slice(2).every(Number.isNaN), 'query 1 attends to the NaN key');
    if (weights) assert.deepEqual(Array.from(weights.data.slice(0, 4)), [0, 0, 0, 0]);
  }
});

describe("the modules' masks", () => {
  const E = 8;
  const weight = (shape, seed = 1) => tensor(shape, (i) => 0.2 * Math.sin(seed * (i + 1)));

  test("MultiheadAttention: keyPaddingMask and attnMask do not stop a NaN key; isCausal does", () => {
    const mha = new attn.MultiheadAttention(E, 2).loadStateDict({
      in_proj_weight: weight([3 * E, E]),
      in_proj_bias: weight([3 * E], 2),
      'out_proj.weight': weight([E, E], 3),
      'out_proj.bias': weight([E], 4),
    });
    // (L, N, E) = (3, 2, E); the key input of token 1 in batch 0 is NaN, so is its projected key.
    const x = tensor([3, 2, E], (i) => Math.sin(0.3 * i));
    const key = tensor([3, 2, E], (i) => (i >= (1 * 2 + 0) * E && i < (1 * 2 + 1) * E ? NaN : Math.sin(0.3 * i)));
    // Output rows in (l, n) order: batch 0's are rows 0, 2, 4.
    const nanTokens = (opts) => nanRows(mha.forward(x, key, x, opts).output.data, E);
    for (const needWeights of [true, false]) {
      const padding = { shape: [2, 3], data: Uint8Array.of(0, 1, 0, 0, 0, 0) }; // token 1 of batch 0 is padding
      assert.deepEqual(nanTokens({ keyPaddingMask: padding, needWeights }), [0, 2, 4], 'keyPaddingMask');
      const notAllowed = { shape: [3, 3], data: Uint8Array.of(0, 1, 0, 0, 1, 0, 0, 1, 0) }; // no query may see key 1
      assert.deepEqual(nanTokens({ attnMask: notAllowed, needWeights }), [0, 2, 4], 'boolean attnMask (1 = not allowed)');
      const additive = { shape: [3, 3], data: Float32Array.of(0, -Infinity, 0, 0, -Infinity, 0, 0, -Infinity, 0) };
      assert.deepEqual(nanTokens({ attnMask: additive, needWeights }), [0, 2, 4], 'additive attnMask');
      // Causal: token 0 never scores key 1.
      assert.deepEqual(nanTokens({ isCausal: true, needWeights }), [2, 4], 'isCausal');
    }
    mha.dispose();
  });

  test('SelfAttention and AdditiveAttention: attnMask (1 = masked out) does not stop a NaN token', () => {
    const self = new attn.SelfAttention(E, 4, 4).loadStateDict({
      'W_q.weight': weight([4, E]),
      'W_k.weight': weight([4, E], 2),
      'W_v.weight': weight([4, E], 3),
    });
    // x [1, 4, E], token 2 NaN; no query may see key 2 but its own, and query 3 sees nothing.
    const x = tensor([1, 4, E], (i) => (Math.floor(i / E) === 2 ? NaN : Math.cos(i)));
    const maskedOut = { shape: [4, 4], data: Uint8Array.of(0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 1, 1, 1) };
    const { output } = self.forward(x, { attnMask: maskedOut });
    assert.deepEqual(nanRows(output.data, 4), [0, 1, 2]);
    assert.deepEqual(Array.from(output.data.subarray(12)), [0, 0, 0, 0], 'query 3 sees no key: zeros');
    self.dispose();

    const additive = new attn.AdditiveAttention(E, E, 4).loadStateDict({
      'W_q.weight': weight([4, E]),
      'W_k.weight': weight([4, E], 2),
      'W_v.weight': weight([1, 4], 3),
    });
    const query = tensor([1, 2, E], (i) => Math.sin(i));
    const keys = tensor([1, 3, E], (i) => (Math.floor(i / E) === 1 ? NaN : Math.cos(i)));
    const values = tensor([1, 3, 2], (i) => i);
    const keyOneOut = { shape: [2, 3], data: Uint8Array.of(0, 1, 0, 0, 1, 0) };
    assert.deepEqual(nanRows(additive.forward(query, keys, values, { attnMask: keyOneOut }).output.data, 2), [0, 1]);
    additive.dispose();
  });

  test('RelativeMultiHeadAttention: mask (0 = masked out) does not stop a NaN key', () => {
    const heads = 2;
    const dk = E / heads;
    const P = 4;
    const rel = new attn.RelativeMultiHeadAttention(heads, E, { P }).loadStateDict({
      'query.linear.weight': weight([E, E]),
      'key.linear.weight': weight([E, E], 2),
      'value.linear.weight': weight([E, E], 3),
      'value.linear.bias': weight([E], 4),
      'output.weight': weight([E, E], 5),
      'output.bias': weight([E], 6),
      key_pos_embeddings: weight([2 * P, heads, dk], 7),
      key_pos_bias: weight([2 * P, heads], 8),
      query_pos_bias: weight([heads, dk], 9),
    });
    // query [2, 1, E]; key and value [3, 1, E], key 1 NaN and masked out for both queries.
    const query = tensor([2, 1, E], (i) => Math.sin(i));
    const key = tensor([3, 1, E], (i) => (Math.floor(i / E) === 1 ? NaN : Math.cos(i)));
    const value = tensor([3, 1, E], (i) => Math.sin(2 * i));
    const keep = { shape: [1, 3, 1], data: Uint8Array.of(1, 0, 1) };
    assert.deepEqual(nanRows(rel.forward(query, key, value, { mask: keep }).output.data, E), [0, 1]);
    rel.dispose();
  });

  test("GroupedQueryAttention: padding does not stop a NaN token; a window it has left does", () => {
    const gqa = (opts) =>
      new attn.GroupedQueryAttention(E, 2, 1, { headDim: 4, ...opts }).loadStateDict({
        'q_proj.weight': weight([8, E]),
        'k_proj.weight': weight([4, E], 2),
        'v_proj.weight': weight([4, E], 3),
        'o_proj.weight': weight([E, 8], 4),
      });
    // Token 0 is NaN (its query, key and value), and padding with token 1.
    const x = (t) => tensor([1, t, E], (i) => (i < E ? NaN : Math.sin(0.7 * i)));
    const padded = gqa();
    const attentionMask = { shape: [1, 5], data: Uint8Array.of(0, 0, 1, 1, 1) };
    // Tokens 0 and 1 see no key (zeros); tokens 2–4 are masked from token 0's key, which still reaches them.
    const { output } = padded.forward(x(5), { attentionMask });
    assert.deepEqual(nanRows(output.data, E), [2, 3, 4]);
    assert.ok(output.data.subarray(0, 2 * E).every((v) => v === 0), 'the padded tokens see nothing: zeros');
    padded.dispose();

    // slidingWindow 3: the prefill multiplies token 0's value in for every query (one group); once
    // token 0 has left the window, decode steps do not score or read it.
    const windowed = gqa({ slidingWindow: 3 });
    const cache = windowed.createCache(16);
    assert.deepEqual(nanRows(windowed.forward(x(5), { cache }).output.data, E), [0, 1, 2, 3, 4]);
    const step = tensor([1, 1, E], (i) => Math.cos(i));
    assert.deepEqual(nanRows(windowed.forward(step, { cache }).output.data, E), [], 'token 5 sees tokens 3–5');
    windowed.dispose();
    // Without a window, the NaN key stays visible to every later token.
    const plain = gqa();
    const plainCache = plain.createCache(16);
    plain.forward(x(5), { cache: plainCache });
    assert.deepEqual(nanRows(plain.forward(step, { cache: plainCache }).output.data, E), [0]);
    plain.dispose();
  });

  test("KVCache.attend: the appended padding mask and attnMask do not stop a NaN key; the window does", () => {
    const cache = new attn.KVCache({ heads: 1, headDim: 2, maxLength: 8 });
    // Positions 0–3; position 1's key is NaN and padding.
    cache.append(tensor([1, 1, 4, 2], (i) => (i === 2 ? NaN : Math.sin(i))), tensor([1, 1, 4, 2], (i) => i), {
      mask: { shape: [1, 4], data: Uint8Array.of(1, 0, 1, 1) },
    });
    const query = tensor([1, 1, 1, 2], (i) => Math.cos(i));
    for (const needWeights of [true, false]) {
      assert.deepEqual(nanRows(cache.attend(query, { needWeights }).output.data, 2), [0], 'padding');
      const hideOne = { shape: [1, 4], data: Uint8Array.of(1, 0, 1, 1) };
      assert.deepEqual(nanRows(cache.attend(query, { attnMask: hideOne, needWeights }).output.data, 2), [0], 'attnMask');
      // window 2: the query (position 3) sees positions 2 and 3 only.
      assert.deepEqual(nanRows(cache.attend(query, { window: 2, needWeights }).output.data, 2), [], 'window');
    }
    cache.dispose();
  });
});

test('MultiheadAttention: NaN in one batch element leaves the other finite', () => {
  const E = 8;
  const mha = new attn.MultiheadAttention(E, 2).loadStateDict({
    in_proj_weight: tensor([3 * E, E], (i) => 0.1 * Math.sin(i)),
    in_proj_bias: tensor([3 * E], () => 0),
    'out_proj.weight': tensor([E, E], (i) => 0.1 * Math.cos(i)),
    'out_proj.bias': tensor([E], () => 0.5),
  });
  // (L, N, E) = (3, 2, E): token (l = 1, n = 1) holds a NaN.
  const x = tensor([3, 2, E], (i) => (i === (1 * 2 + 1) * E ? NaN : Math.sin(0.3 * i)));
  for (const needWeights of [true, false]) {
    const { output } = mha.forward(x, x, x, { needWeights });
    for (let l = 0; l < 3; l++) {
      const row = (n) => output.data.slice((l * 2 + n) * E, (l * 2 + n + 1) * E);
      assert.ok(row(0).every(Number.isFinite), `token ${l} of batch 0 is finite`);
      assert.ok(row(1).every(Number.isNaN), `token ${l} of batch 1 is NaN`);
    }
  }
  mha.dispose();
});
