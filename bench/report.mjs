// What the bench scripts print and write: the attention bench's table and --json rows
// (tableHeader, tableRow, jsonRows), a table of named columns for the others (columnTable), and
// the end of a run: its goal lines, then its rows as JSON when --json names a file (report).
import { writeFile } from 'node:fs/promises';

// ---------------------------------------------------------------------------------------------
// bench/attention.mjs's table.

const COLUMNS = [
  ['impl', 20, 'left'],
  ['L', 5],
  ['thr', 3],
  ['weights', 7],
  ['min ms', 10],
  ['median ms', 10],
  ['GFLOP/s', 8],
  ['% peak', 6],
  ['max abs err', 11],
  ['ratio', 6],
  ['note', 0, 'left'],
];

const cell = (text, [, width, align]) => (align === 'left' ? String(text).padEnd(width) : String(text).padStart(width));
const line = (cells) => cells.map((text, i) => cell(text, COLUMNS[i])).join('  ').trimEnd();

export function tableHeader() {
  const header = line(COLUMNS.map(([name]) => name));
  return `${header}\n${'-'.repeat(Math.max(header.length, 110))}`;
}

const fixed = (value, digits) => (Number.isFinite(value) ? value.toFixed(digits) : '');
const ms = (value) => (value === undefined ? '' : value >= 100 ? value.toFixed(1) : value.toFixed(2));
const error = (value) => (value === undefined ? '' : value === 0 ? '0' : value.toExponential(1));

/** One table line. `row`: { impl, L, threads, weights, min_ms?, median_ms?, gflops?, peakPct?, max_abs_err?, ratio?, note? } */
export function tableRow(row) {
  return line([
    row.impl,
    row.L ?? '',
    row.threads ?? '',
    row.weights === undefined ? '' : row.weights ? 'on' : 'off',
    ms(row.min_ms),
    ms(row.median_ms),
    fixed(row.gflops, 1),
    fixed(row.peakPct, 0),
    error(row.max_abs_err),
    fixed(row.ratio, 2),
    row.note ?? '',
  ]);
}

// The documented keys first, in this order; extras (runs, formulation, note, ...) after them.
const KEY_ORDER = ['impl', 'L', 'M', 'N', 'K', 'threads', 'weights', 'min_ms', 'median_ms', 'gflops', 'max_abs_err'];
const round = (value, digits) => (Number.isFinite(value) ? Number(value.toPrecision(digits)) : value);

/** The rows bench/attention.mjs's --json writes: measured rows only (skipped and failed ones are left out). */
export function jsonRows(rows) {
  return rows
    .filter((row) => row.median_ms !== undefined || row.gflops !== undefined || row.heap_growth_bytes !== undefined)
    .map(({ peakPct, ratio, ...row }) => {
      const out = {};
      for (const key of [...KEY_ORDER, ...Object.keys(row)]) {
        const value = row[key];
        if (value !== undefined && !(key in out)) out[key] = key.endsWith('_ms') || key === 'gflops' ? round(value, 6) : value;
      }
      return out;
    });
}

// ---------------------------------------------------------------------------------------------
// A table of named columns.

/**
 * `columns`: [title, width, format(row) → string | number | undefined, align ('left' | 'right',
 * default right)]. → { header(): the title line and a rule, row(row): one line }; a column whose
 * format gives undefined (or throws on a missing field) stays blank.
 */
export function columnTable(columns) {
  const pad = (text, [, width, , align]) => (align === 'left' ? String(text).padEnd(width) : String(text).padStart(width));
  const value = (row, format) => {
    try {
      return format(row) ?? '';
    } catch {
      return '';
    }
  };
  return {
    header() {
      const title = columns.map((column) => pad(column[0], column)).join('  ').trimEnd();
      return `${title}\n${'-'.repeat(title.length)}`;
    },
    row(row) {
      return columns.map((column) => pad(value(row, column[2]), column)).join('  ').trimEnd();
    },
  };
}

// ---------------------------------------------------------------------------------------------
// The end of a run.

export async function report(goals, rows, jsonFile) {
  console.log('');
  for (const goal of goals) console.log(goal);
  if (jsonFile) {
    await writeFile(jsonFile, `${JSON.stringify(rows, null, 2)}\n`);
    console.log(`wrote ${rows.length} rows to ${jsonFile}`);
  }
}
