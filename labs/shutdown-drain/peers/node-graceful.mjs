// A Node.js server with the same shutdown sequence as the lab's `full`
// variant, for a manual check with the probe (the tests do not need Node):
//
//   lab-shutdown-drain probe --port 18240 --slow-path /slow -- node peers/node-graceful.mjs 18240
//
// Timings match the lab's quick mode: drain wait 400 ms, hard deadline 1000 ms.
import http from 'node:http';

const port = Number(process.argv[2] ?? 3000);
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
let ready = true;
let draining = false;

const server = http.createServer(async (request, response) => {
  if (draining) response.setHeader('Connection', 'close');
  if (request.url === '/livez') return response.end('alive\n');
  if (request.url === '/readyz') {
    response.statusCode = ready ? 200 : 503;
    return response.end(ready ? 'ready\n' : 'shutting down\n');
  }
  if (request.url === '/slow') await sleep(800);
  response.end('done\n');
});
server.listen(port, '127.0.0.1');

// ANCHOR: shutdown
process.once('SIGTERM', async () => {
  ready = false; // 1. readiness first
  draining = true;
  await sleep(400); // 2. keep serving while the balancer notices
  const deadline = setTimeout(() => process.exit(1), 1000 - 400);
  deadline.unref(); // a timer that does not itself keep the process alive
  server.close(() => process.exit(0)); // 3. stop accepting; 5. exit when drained
  server.closeIdleConnections(); // idle keep-alive sockets: close now
});
// ANCHOR_END: shutdown
