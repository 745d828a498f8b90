// A small static file server for the web explorer: 127.0.0.1 only, correct MIME types (WebAssembly
// needs application/wasm), no directory listings, no path traversal, no caching of our own files.
// Text and WebAssembly go out gzip-compressed to browsers that accept it (the page's .js + .wasm
// shrink to about a third); each file is compressed at start and again when it changes, and kept in
// memory.
// Usage: node scripts/serve.mjs DIR [PORT]   (PORT 0 picks a free port; the URL is printed)
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import zlib from "node:zlib";

const root = path.resolve(process.argv[2] || ".");
const port = Number(process.argv[3] ?? 8080);
const types = {
  ".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".mjs": "text/javascript; charset=utf-8",
  ".css": "text/css; charset=utf-8", ".wasm": "application/wasm", ".json": "application/json",
  ".png": "image/png", ".svg": "image/svg+xml", ".jsonl": "application/x-ndjson", ".txt": "text/plain; charset=utf-8",
};

const compressible = new Set([".html", ".js", ".mjs", ".css", ".wasm", ".json", ".jsonl", ".svg", ".txt"]);
const gzipped = new Map();  // file -> {mtimeMs, size, bytes}

function gzipOf(file, st) {
  const hit = gzipped.get(file);
  if (hit && hit.mtimeMs === st.mtimeMs && hit.size === st.size) return hit.bytes;
  const bytes = zlib.gzipSync(fs.readFileSync(file), { level: 9 });
  gzipped.set(file, { mtimeMs: st.mtimeMs, size: st.size, bytes });
  return bytes;
}

const server = http.createServer((req, res) => {
  let rel;
  try {
    rel = decodeURIComponent(new URL(req.url, "http://x").pathname);
  } catch {
    res.writeHead(400).end("bad request");
    return;
  }
  if (rel.endsWith("/")) rel += "index.html";
  const file = path.join(root, rel);
  if (!file.startsWith(root + path.sep) || req.method !== "GET" && req.method !== "HEAD") {
    res.writeHead(403).end("forbidden");
    return;
  }
  fs.stat(file, (err, st) => {
    if (err || !st.isFile()) {
      res.writeHead(404, { "Content-Type": "text/plain" }).end("not found");
      return;
    }
    const headers = {
      "Content-Type": types[path.extname(file)] || "application/octet-stream",
      "Content-Length": st.size,
      "Cache-Control": "no-cache",
      "X-Content-Type-Options": "nosniff",
      "Vary": "Accept-Encoding",
    };
    const gzip = compressible.has(path.extname(file)) && /\bgzip\b/.test(req.headers["accept-encoding"] || "");
    if (gzip) {
      const bytes = gzipOf(file, st);
      res.writeHead(200, { ...headers, "Content-Encoding": "gzip", "Content-Length": bytes.length });
      res.end(req.method === "HEAD" ? undefined : bytes);
      return;
    }
    res.writeHead(200, headers);
    if (req.method === "HEAD") res.end();
    else fs.createReadStream(file).pipe(res);
  });
});
// Compressed before the first request, so that the first page load does not wait for it.
function precompress(dir) {
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const file = path.join(dir, entry.name);
    if (entry.isDirectory()) precompress(file);
    else if (entry.isFile() && compressible.has(path.extname(file))) gzipOf(file, fs.statSync(file));
  }
}
precompress(root);
server.listen(port, "127.0.0.1", () => {
  console.log(`K3 Serve Explorer: http://127.0.0.1:${server.address().port}/`);
});
