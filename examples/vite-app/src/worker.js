// A module worker: Vite bundles it (and the package inside it) from the `new Worker(new URL(...))`
// in main.js.
import { run } from './attention.js';

run('worker').then(
  (result) => self.postMessage({ result }),
  (error) => self.postMessage({ error: `${error.name}: ${error.message}` }),
);
