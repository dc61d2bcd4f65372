// onnxruntime-web (wasm backend) in a worker thread per thread count: see onnxruntime-worker.mjs.
import { Worker } from 'node:worker_threads';

export class OrtWorker {
  #worker;
  #pending = new Map();
  #nextId = 0;
  #dead = null;  // why the worker stopped, once it has

  constructor(threads) {
    this.threads = threads;
    this.#worker = new Worker(new URL('./onnxruntime-worker.mjs', import.meta.url), { workerData: { threads } });
    this.#worker.on('message', ({ id, result, error }) => {
      const { resolve, reject } = this.#pending.get(id);
      this.#pending.delete(id);
      error === undefined ? resolve(result) : reject(new Error(error));
    });
    // A wasm abort (out of memory, say) can end the worker: fail what waits on it, and what follows.
    const stop = (error) => {
      this.#dead ??= error;
      for (const { reject } of this.#pending.values()) reject(this.#dead);
      this.#pending.clear();
    };
    this.#worker.on('error', stop);
    this.#worker.on('exit', (code) => stop(new Error(`onnxruntime worker exited (code ${code})`)));
  }

  call(command, args) {
    if (this.#dead) return Promise.reject(this.#dead);
    return new Promise((resolve, reject) => {
      const id = this.#nextId++;
      this.#pending.set(id, { resolve, reject });
      this.#worker.postMessage({ id, command, args });
    });
  }

  /** Ends the worker and ORT's pthreads with it (they would otherwise keep Node alive and spin). */
  terminate() {
    return this.#worker.terminate();
  }
}
