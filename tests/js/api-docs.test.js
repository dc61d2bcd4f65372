// docs/api.md against the types: every option and member that bindings/index.d.ts declares for a
// function or a class is named (in backticks) in that function's or class's section of the API
// reference, so that an option added to the types (GroupedQueryAttention's `dtype`, say) cannot be
// left out of the reference. An options interface must be named in the rows of the section's
// option tables, where it has them, not merely mentioned elsewhere. Members inherited from another
// interface are looked for in that interface's section (AttentionModule's in "Modules").
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

import ts from 'typescript';

import { REPO_ROOT } from './helpers.js';

const api = readFileSync(join(REPO_ROOT, 'docs/api.md'), 'utf8');

// The text of each `##` and `###` section, by heading.
const sections = new Map();
let heading = null;
for (const line of api.split('\n')) {
  const match = /^#{2,3} (.+)$/.exec(line);
  if (match) sections.set((heading = match[1]), '');
  else if (heading) sections.set(heading, `${sections.get(heading)}${line}\n`);
}

// The names in the rows of a section's option tables (header `| option | …`).
function tableOptions(text) {
  const names = new Set();
  let inTable = false;
  for (const line of text.split('\n')) {
    if (!line.startsWith('|')) inTable = false;
    else if (/^\|\s*option\s*\|/.test(line)) inTable = true;
    else if (inTable) for (const [, name] of line.matchAll(/`(\w+)/g)) names.add(name);
  }
  return names;
}

// Each interface of the types: its own members and the interfaces it extends.
const interfaces = new Map();
for (const file of ['bindings/index.d.ts', 'bindings/models/index.d.ts']) {
  const source = ts.createSourceFile(file, readFileSync(join(REPO_ROOT, file), 'utf8'), ts.ScriptTarget.ES2022, true);
  for (const statement of source.statements) {
    if (!ts.isInterfaceDeclaration(statement)) continue;
    interfaces.set(statement.name.text, {
      members: statement.members.map((m) => m.name?.getText(source)).filter((name) => name && !name.startsWith('[')),
      bases: (statement.heritageClauses ?? []).flatMap((clause) => clause.types.map((t) => t.expression.getText(source))),
    });
  }
}

// Interface → the section that documents it; inherited members are looked for in the base's section.
const DOCUMENTED_IN = {
  InitOptions: 'init',
  SdpaOptions: 'scaledDotProductAttention',
  RopeSchemeOptions: 'rope',
  RopeOptions: 'rope',
  AttentionModule: 'Modules',
  MultiheadAttentionOptions: 'MultiheadAttention',
  MultiheadAttentionForwardOptions: 'MultiheadAttention',
  MultiheadAttention: 'MultiheadAttention',
  GroupedQueryAttentionOptions: 'GroupedQueryAttention',
  GroupedQueryAttentionForwardOptions: 'GroupedQueryAttention',
  GroupedQueryAttention: 'GroupedQueryAttention',
  KVCacheOptions: 'KVCache',
  KVCacheAttendOptions: 'KVCache',
  KVCacheAppendOptions: 'KVCache',
  KVCache: 'KVCache',
  LinearOptions: 'Linear',
  Linear: 'Linear',
};

for (const [name, section] of Object.entries(DOCUMENTED_IN)) {
  test(`${name}: every member is named in docs/api.md's section "${section}"`, () => {
    assert.ok(interfaces.has(name), `bindings/index.d.ts declares ${name}`);
    assert.ok(sections.has(section), `docs/api.md has a section "${section}"`);
    const missing = [];
    const check = (iface, where) => {
      const text = sections.get(where);
      // An options interface whose section has an option table: a row of it (not a mention elsewhere).
      const rows = iface.endsWith('Options') ? tableOptions(text) : new Set();
      const named = (member) => (rows.size ? rows.has(member) : text.includes(`\`${member}`));
      for (const member of interfaces.get(iface).members) if (!named(member)) missing.push(`${iface}.${member}`);
      for (const base of interfaces.get(iface).bases) if (interfaces.has(base)) check(base, DOCUMENTED_IN[base] ?? where);
    };
    check(name, section);
    assert.deepEqual(missing, []);
  });
}
