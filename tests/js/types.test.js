// The published types, checked as users' TypeScript sees them: tests/types/usage.ts calls every API
// under `strict`, tests/types/errors.ts holds wrong calls that must each fail (@ts-expect-error).
// `attention-wasm` resolves through package.json "exports" to dist/index.d.mts.
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { test } from 'node:test';
import { promisify } from 'node:util';
import { REPO_ROOT } from './helpers.js';

const run = promisify(execFile);

for (const config of ['tests/types/tsconfig.json', 'tests/types/tsconfig.node16.json']) {
  test(`tsc -p ${config} passes`, { timeout: 120_000 }, async () => {
    const result = await run('npx', ['--no', '--', 'tsc', '-p', config], {
      cwd: REPO_ROOT,
      env: { ...process.env, npm_config_update_notifier: 'false', npm_config_loglevel: 'error' },
    }).catch((error) => error);
    assert.equal(result.code ?? 0, 0, `tsc failed:\n${result.stdout}${result.stderr}`);
  });
}
