/**
 * The operator console at `/console`: the static files `npm run build` writes to console/dist (the
 * front end lives in console/), served without a token — the page signs in with an API token of
 * its own, kept in the tab's session storage, and reads everything through /api/v1.
 *
 * The files are read once, when the server is built, and served from memory: a request names one
 * of them or gets 404, so no request ever reaches the file system (no path to traverse), and a
 * build made while the service runs is served from its next start.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { FastifyBaseLogger, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { Type } from 'typebox';
import { sendProblem } from '../http-kit/problem.js';
import { problemResponse } from '../http-kit/schemas.js';
import { packageRoot } from '../shared/package-root.js';

/** Where the console's build lands, in the package (the service runs from src/ or the dist/ bundle). */
const CONSOLE_DIR = path.join(packageRoot, 'console', 'dist');

/**
 * Nothing but the console's own files may run or load, the page may only talk to this service,
 * and it may not be framed (clickjacking) or submit forms anywhere. No inline script or style:
 * the build emits neither.
 */
export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self'",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'none'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE_HEADERS: Record<string, string> = {
  'content-security-policy': CONSOLE_CSP,
  'x-content-type-options': 'nosniff',
  'referrer-policy': 'no-referrer',
  'x-frame-options': 'DENY',
  'cross-origin-opener-policy': 'same-origin',
  // Revalidated on every load (cheap: the ETag), so a new build shows after a restart at once.
  'cache-control': 'no-cache',
  'x-robots-tag': 'noindex',
};

const TYPES: Record<string, string> = {
  '.html': 'text/html; charset=utf-8',
  '.js': 'text/javascript; charset=utf-8',
  '.css': 'text/css; charset=utf-8',
  '.map': 'application/json; charset=utf-8',
  '.svg': 'image/svg+xml',
};

interface ConsoleFile {
  body: Buffer;
  type: string;
  etag: string;
}

const NOT_BUILT =
  'The console is not built: run `npm run build` (it writes console/dist) and restart the service';

/** The built files by name; empty when the console was not built. */
function readConsoleFiles(dir: string): Map<string, ConsoleFile> {
  const files = new Map<string, ConsoleFile>();
  if (!fs.existsSync(dir)) return files;
  for (const entry of fs.readdirSync(dir, { withFileTypes: true })) {
    const type = TYPES[path.extname(entry.name)];
    if (!entry.isFile() || type === undefined) continue;
    const body = fs.readFileSync(path.join(dir, entry.name));
    const etag = `"${crypto.createHash('sha256').update(body).digest('base64url').slice(0, 27)}"`;
    files.set(entry.name, { body, type, etag });
  }
  return files;
}

function serve(files: Map<string, ConsoleFile>, name: string, request: FastifyRequest, reply: FastifyReply) {
  const file = files.get(name);
  if (!file) {
    if (!files.has('index.html')) return sendProblem(reply, 404, 'not_found', NOT_BUILT);
    return sendProblem(reply, 404, 'not_found', `The console has no file ${JSON.stringify(name)}`);
  }
  reply.header('etag', file.etag);
  if (request.headers['if-none-match'] === file.etag) return reply.code(304).send();
  return reply.type(file.type).send(file.body);
}

export function registerConsoleRoutes(app: FastifyInstance, logger: FastifyBaseLogger): void {
  const files = readConsoleFiles(CONSOLE_DIR);
  if (!files.has('index.html')) logger.warn({ dir: CONSOLE_DIR }, NOT_BUILT);
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  // On every answer of these routes, errors included.
  const onSend = async (_request: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    reply.headers(PAGE_HEADERS);
    return payload;
  };
  const notFound = problemResponse(404, 'No such file of the console, or the console was not built');

  r.get(
    '/console',
    {
      onSend,
      schema: {
        security: [],
        tags: ['console'],
        operationId: 'getConsole',
        summary: 'The operator console (an HTML page; sign in with an API token)',
        description:
          "A browser console for one account: subscriptions, the delivery log with resend and recover, the chain followers, registries and their anchoring. The page needs no token to load; it asks for an API token, keeps it in the tab's session storage only and calls /api/v1 with it, so it shows exactly what that token's account may read. Served under a strict Content-Security-Policy (its own scripts and styles only).",
        response: {
          200: {
            description: 'The console page',
            content: { 'text/html': { schema: { type: 'string' } } },
          },
          304: Type.Null({ description: 'Not modified since the ETag sent in If-None-Match' }),
          404: notFound,
        },
      },
    },
    async (request, reply) => serve(files, 'index.html', request, reply),
  );

  r.get(
    '/console/:file',
    {
      onSend,
      schema: {
        security: [],
        tags: ['console'],
        operationId: 'getConsoleFile',
        summary: "A file of the console's build (script, stylesheet, icon, source map)",
        params: Type.Object({
          file: Type.String({
            minLength: 1,
            maxLength: 64,
            pattern: '^[^\\u0000-\\u001F\\u007F]*$',
            description: 'A file name of the build, e.g. app.js',
          }),
        }),
        response: {
          200: {
            description: 'The file, with its content type',
            content: {
              'text/javascript': { schema: { type: 'string' } },
              'text/css': { schema: { type: 'string' } },
              'image/svg+xml': { schema: { type: 'string' } },
              'application/json': { schema: { type: 'string', description: 'A source map' } },
            },
          },
          304: Type.Null({ description: 'Not modified since the ETag sent in If-None-Match' }),
          400: problemResponse(400, 'The name holds a control character or is longer than 64 characters'),
          404: notFound,
        },
      },
    },
    async (request, reply) => serve(files, request.params.file, request, reply),
  );
}
