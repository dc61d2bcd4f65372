// ours-native: the same core built natively (build/native/attention_bench_native), which times
// itself after one warm-up run and prints {"min_ms", "median_ms", "output_head"}.
import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { E, H } from '../problem.mjs';

export const NATIVE_BINARY = fileURLToPath(new URL('../../build/native/attention_bench_native', import.meta.url));

export function nativeAvailable() {
  return existsSync(NATIVE_BINARY);
}

/** { min_ms, median_ms, runs, output_head } */
export async function runNative(L, threads, needWeights, runs) {
  const args = [L, E, H, threads, needWeights ? 1 : 0, runs].map(String);
  const { stdout } = await promisify(execFile)(NATIVE_BINARY, args, { maxBuffer: 1 << 20 });
  return { ...JSON.parse(stdout), runs };
}
