// The end of a bench script's run: its goal lines, then its rows as JSON when --json names a file.
import { writeFile } from 'node:fs/promises';

export async function report(goals, rows, jsonFile) {
  console.log('');
  for (const goal of goals) console.log(goal);
  if (jsonFile) {
    await writeFile(jsonFile, `${JSON.stringify(rows, null, 2)}\n`);
    console.log(`wrote ${rows.length} rows to ${jsonFile}`);
  }
}
