// The reference server for bench/api.ts: fastify's hello world, configured like Ledgerhook's HTTP
// server (same fastify, same loader, same logger level), listening on HOST:PORT (PORT=0 picks one).
import Fastify from 'fastify';

const app = Fastify({ logger: { level: process.env.LOG_LEVEL || 'warn' } });
app.get('/', async () => ({ hello: 'world' }));

const url = await app.listen({
  host: process.env.HOST || '127.0.0.1',
  port: Number(process.env.PORT || 0),
});
process.stdout.write(`${JSON.stringify({ msg: 'hello-world is serving', url })}\n`);

const stop = () => {
  app.close().then(
    () => process.exit(0),
    () => process.exit(1),
  );
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
// Started by bench/api.ts with a stdin pipe: when that process dies, so does this one.
if (process.env.EXIT_WITH_STDIN === '1') {
  process.stdin.on('end', stop);
  process.stdin.resume();
}
