// A dependency-free static server for the demo and the browser tests. It serves the repo root with
// the headers a cross-origin-isolated page needs (SharedArrayBuffer, hence the pthreads build)
// and a strict CSP, so the demo proves the package works without 'unsafe-eval' or inline code.
//
//   node scripts/serve.mjs            # http://127.0.0.1:8080/
//   PORT=0 node scripts/serve.mjs     # any free port
import { createReadStream } from 'node:fs';
import { realpath, stat } from 'node:fs/promises';
import { createServer } from 'node:http';
import { extname, join, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../', import.meta.url));

const MIME = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.mjs': 'text/javascript; charset=utf-8',
  '.wasm': 'application/wasm', // instantiateStreaming refuses any other type
  '.css': 'text/css; charset=utf-8',
  '.json': 'application/json; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.png': 'image/png',
  '.svg': 'image/svg+xml',
  '.txt': 'text/plain; charset=utf-8',
};

const HEADERS = {
  // COOP + COEP make the page cross-origin isolated: SharedArrayBuffer exists, threads may run.
  'Cross-Origin-Opener-Policy': 'same-origin',
  'Cross-Origin-Embedder-Policy': 'require-corp',
  'Cross-Origin-Resource-Policy': 'same-origin',
  // 'wasm-unsafe-eval' allows WebAssembly compilation and nothing else; no JS eval, no inline code.
  'Content-Security-Policy':
    "default-src 'self'; script-src 'self' 'wasm-unsafe-eval'; worker-src 'self'; img-src 'self' data: blob:",
  'X-Content-Type-Options': 'nosniff',
  // Revalidate every time: a rebuilt dist/ must never be mixed with a cached one.
  'Cache-Control': 'no-cache',
};

function send(res, status, body, headers = {}) {
  res.writeHead(status, { ...HEADERS, 'Content-Type': 'text/plain; charset=utf-8', ...headers });
  res.end(body);
}

function isInside(root, path) {
  return path === root || path.startsWith(root.endsWith(sep) ? root : root + sep);
}

async function handle(req, res, root) {
  if (req.method !== 'GET' && req.method !== 'HEAD') return send(res, 405, 'Method Not Allowed\n', { Allow: 'GET, HEAD' });

  // Work on the raw path: URL parsing would silently resolve '..' and hide a traversal attempt.
  const rawPath = req.url.split(/[?#]/, 1)[0];
  let path;
  try {
    path = decodeURIComponent(rawPath);
  } catch {
    return send(res, 400, 'Bad Request\n');
  }
  const segments = path.split(/[/\\]/);
  if (!path.startsWith('/') || path.includes('\0') || segments.includes('..')) return send(res, 403, 'Forbidden\n');
  // Dot-files and dot-folders (.git, .env) are never part of the demo.
  if (segments.some((segment) => segment.startsWith('.'))) return send(res, 404, 'Not Found\n');
  if (path === '/') return send(res, 302, 'Found\n', { Location: '/web/' });

  let file = resolve(root, '.' + path);
  try {
    let info = await stat(file);
    if (info.isDirectory()) {
      // Relative URLs inside index.html only resolve against a URL that ends in '/'.
      if (!rawPath.endsWith('/')) return send(res, 301, 'Moved Permanently\n', { Location: rawPath + '/' });
      file = join(file, 'index.html');
      info = await stat(file);
    }
    // A symlink must not lead outside the root either.
    if (!info.isFile() || !isInside(root, await realpath(file))) return send(res, 404, 'Not Found\n');
    res.writeHead(200, {
      ...HEADERS,
      'Content-Type': MIME[extname(file).toLowerCase()] ?? 'application/octet-stream',
      'Content-Length': info.size,
    });
    if (req.method === 'HEAD') return res.end();
    createReadStream(file)
      .on('error', () => res.destroy())
      .pipe(res);
  } catch (error) {
    if (error.code === 'ENOENT' || error.code === 'ENOTDIR') return send(res, 404, 'Not Found\n');
    send(res, 500, 'Internal Server Error\n');
  }
}

/**
 * Starts the server. `port` 0 picks a free port.
 * @param {{ port?: number, root?: string }} [opts]
 * @returns {Promise<{ url: string, close(): Promise<void> }>}
 */
export async function startServer({ port = 8080, root = REPO_ROOT } = {}) {
  const realRoot = await realpath(resolve(root));
  const server = createServer((req, res) => {
    handle(req, res, realRoot).catch(() => res.destroy());
  });
  await new Promise((resolveListen, reject) => {
    server.once('error', reject);
    server.listen(port, '127.0.0.1', resolveListen);
  });
  return {
    url: `http://127.0.0.1:${server.address().port}/`,
    close() {
      // Keep-alive connections from a browser would otherwise hold close() open.
      server.closeAllConnections();
      return new Promise((done) => server.close(() => done()));
    },
  };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const port = process.env.PORT === undefined || process.env.PORT === '' ? 8080 : Number(process.env.PORT);
  if (!Number.isInteger(port) || port < 0 || port > 65535) {
    console.error(`PORT must be an integer in [0, 65535], got ${JSON.stringify(process.env.PORT)}`);
    process.exit(1);
  }
  const { url } = await startServer({ port });
  console.log(`Serving the demo at ${url}`);
}
