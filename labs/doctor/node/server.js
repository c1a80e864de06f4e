// The doctor lab's Node server: the routes of the Rust services, with every
// one of Node's server settings at its default (keepAliveTimeout 5 s,
// headersTimeout 60 s, requestTimeout 300 s, no socket timeout). The port is
// the last argument.
const http = require("http");

const port = Number(process.argv[process.argv.length - 1]);
const POOL_SLOTS = 4;
const POOL_HOLD_MS = 100;
let busy = 0;
const waiting = [];

function release() {
  const next = waiting.shift();
  if (next) next();
  else busy -= 1;
}

function acquire(then) {
  if (busy < POOL_SLOTS) {
    busy += 1;
    then();
  } else {
    waiting.push(then);
  }
}

const server = http.createServer((req, res) => {
  const path = req.url.split("?")[0];
  if (req.method === "POST" && path === "/upload") {
    let bytes = 0;
    req.on("data", (chunk) => (bytes += chunk.length));
    req.on("end", () => res.end(`${bytes} bytes\n`));
  } else if (path === "/") {
    res.end("ok\n");
  } else if (path === "/big") {
    res.end("x".repeat(256 * 1024));
  } else if (path === "/slow") {
    // A dependency that never answers.
  } else if (path === "/report") {
    // 300 ms of CPU on the event loop.
    const started = Date.now();
    let hash = 0;
    while (Date.now() - started < 300) hash = (hash * 31 + 7) | 0;
    res.end(`report ${hash}\n`);
  } else if (path === "/work") {
    acquire(() => setTimeout(() => {
      release();
      res.end("done\n");
    }, POOL_HOLD_MS));
  } else if (path === "/readyz") {
    res.end("ready\n");
  } else {
    res.statusCode = 404;
    res.end();
  }
});

server.listen(port, "127.0.0.1");
