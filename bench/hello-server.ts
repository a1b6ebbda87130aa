// The reference server for bench/api.ts: fastify's hello world, configured like Ledgerhook's HTTP
// server (same fastify, same loader, same logger level), listening on HOST:PORT (PORT=0 picks one).
import Fastify from 'fastify';
import { exitWhenStopped } from './child-server.js';

const app = Fastify({ logger: { level: process.env.LOG_LEVEL || 'warn' } });
app.get('/', async () => ({ hello: 'world' }));

const url = await app.listen({
  host: process.env.HOST || '127.0.0.1',
  port: Number(process.env.PORT || 0),
});
process.stdout.write(`${JSON.stringify({ msg: 'hello-world is serving', url })}\n`);

exitWhenStopped(() => app.close());
