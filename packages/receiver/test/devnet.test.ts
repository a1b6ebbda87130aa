/**
 * The receiver library against a real Ledgerhook: the service following a real anvil devnet
 * delivers to a real express app and a real fastify app on loopback, each with the middleware
 * and its subscription's secret. Transfers arrive verified and typed and are acknowledged; a
 * resend is deduplicated; forged, stale and unsigned requests are 401; a failing handler is
 * retried by the service; test notifications, registry events and contract events (a real log of
 * the EventZoo contract) are typed; the bodies match the OpenAPI document's schemas, and the
 * committed types are what that document generates.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Ajv } from 'ajv';
import addFormatsModule from 'ajv-formats';
import express, { type RequestHandler } from 'express';
import Fastify, { type FastifyInstance } from 'fastify';
import { Webhook } from 'standardwebhooks';
import { type Hex, parseEther } from 'viem';
import { afterAll, beforeAll, describe, expect, test } from 'vitest';
import { type Created, type Devnet, startDevnet } from '../../../test/helpers/devnet.js';
import { waitFor } from '../../../test/helpers/process.js';
import { GENERATED_FILE, webhookTypes } from '../scripts/generate-types.js';
import { expressReceiver } from '../src/express.js';
import { fastifyReceiver } from '../src/fastify.js';
import type { DeliveryContext } from '../src/receive.js';
import { isContractLog, isRegistryEvent, isTest, type WebhookEvent } from '../src/types.js';

const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

type Kind = 'express' | 'fastify';
const KINDS: Kind[] = ['express', 'fastify'];

interface Handled {
  event: WebhookEvent;
  context: DeliveryContext;
  threw: boolean;
}

interface Attempt {
  attempt: number;
  trigger: string;
  statusCode: number | null;
  response: string | null;
}
interface Logged {
  id: string;
  state: string;
  payload: { txId?: string };
  attempts: Attempt[];
}

type OpenApiDocument = { components: { schemas: Record<string, Schema> } };
type Schema = { $ref?: string; allOf?: Schema[]; properties?: Record<string, Schema> };

async function listen(server: http.Server): Promise<string> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

describe('the receiver middleware against a Ledgerhook devnet', () => {
  let d: Devnet;
  let doc: OpenApiDocument;
  const servers: http.Server[] = [];
  let fastifyApp: FastifyInstance | undefined;
  const urls = {} as Record<Kind, string>;
  const subs = {} as Record<Kind, Created>;
  const handled: Record<Kind, Handled[]> = { express: [], fastify: [] };
  /** How many of the next calls of each handler throw. */
  const failures: Record<Kind, number> = { express: 0, fastify: 0 };
  /** What each middleware reported through onError. */
  const reported: Record<Kind, string[]> = { express: [], fastify: [] };
  const onErrorFor = (kind: Kind) => (error: unknown, id: string) =>
    reported[kind].push(`${id}: ${(error as Error).message}`);
  const registryEvents: Handled[] = [];
  /** What the middleware given an ed25519 subscription's whpk_ public key handled. */
  const ed25519Events: Handled[] = [];
  let ed25519Subscription: { id: string; publicKey: string; secret?: string };
  let registryUrl: string;
  let registryReceiver: RequestHandler | undefined;

  const handlerFor = (kind: Kind) => async (event: WebhookEvent, context: DeliveryContext) => {
    const threw = failures[kind] > 0;
    handled[kind].push({ event, context, threw });
    if (threw) {
      failures[kind]--;
      throw new Error('the handler failed, as this test asked');
    }
  };
  const handledFor = (kind: Kind, id: string) => handled[kind].filter((h) => h.context.id === id);

  const log = async (kind: Kind): Promise<Logged[]> => {
    const res = await d.t.request('GET', `/api/v1/subscription/${subs[kind].id}/notifications?limit=100`);
    expect(res.status, res.text).toBe(200);
    return (res.body as { data: Logged[] }).data;
  };
  /** The delivery log's entry for a transaction, once it reads as `done` says. */
  const loggedWhen = (kind: Kind, txId: string, done: (n: Logged) => boolean) =>
    waitFor(async () => {
      const entry = (await log(kind)).find((n) => n.payload.txId === txId);
      return entry && done(entry) ? entry : undefined;
    }, `${kind}'s log entry for ${txId}`);

  /** Every field of `body` is documented by the schema (following $ref and allOf), nested objects too. */
  function undocumented(schema: Schema, body: Record<string, unknown>, at = ''): string[] {
    const properties: Record<string, Schema> = {};
    const collect = (s: Schema) => {
      if (s.$ref) collect(doc.components.schemas[s.$ref.replace('#/components/schemas/', '')]!);
      for (const part of s.allOf ?? []) collect(part);
      Object.assign(properties, s.properties);
    };
    collect(schema);
    return Object.entries(body).flatMap(([key, value]) => {
      const property = properties[key];
      if (!property) return [`${at}${key}`];
      return value !== null && typeof value === 'object' && !Array.isArray(value) && property.properties
        ? undocumented(property, value as Record<string, unknown>, `${at}${key}.`)
        : [];
    });
  }
  let validateEvent: (schema: string, body: unknown) => string[];

  beforeAll(async () => {
    // The embedded database only: what is under test is the receiving side, which no storage
    // backend changes (the service's delivery on PostgreSQL has suites of its own).
    d = await startDevnet('pglite');
    doc = (await d.t.request('GET', '/openapi.json', { token: null })).body as OpenApiDocument;
    const ajv = addFormats(new Ajv({ strict: false, allErrors: true }));
    ajv.addSchema(doc, 'openapi');
    validateEvent = (schema, body) => {
      const validate = ajv.getSchema(`openapi#/components/schemas/${schema}`)!;
      return validate(body) ? [] : (validate.errors ?? []).map((e) => `${e.instancePath} ${e.message}`);
    };

    // Each subscription's secret comes with it, and it needs the receiver's URL first: so the
    // servers listen before the middleware, which is then put in place with the secret.
    const expressApp = express();
    const expressServer = http.createServer(expressApp);
    servers.push(expressServer);
    urls.express = `${await listen(expressServer)}/hooks`;
    registryUrl = urls.express.replace(/hooks$/, 'registry-hooks');
    const ed25519Url = urls.express.replace(/hooks$/, 'ed25519-hooks');

    let fastifyRoute: http.RequestListener = (_req, res) => res.writeHead(503).end();
    const fastifyServer = http.createServer((req, res) => fastifyRoute(req, res));
    servers.push(fastifyServer);
    urls.fastify = `${await listen(fastifyServer)}/hooks`;

    for (const kind of KINDS) {
      subs[kind] = await d.subscribe(d.addresses[1]!, {
        attr: { address: d.addresses[1], chain: 'DEVNET', url: urls[kind] },
        mempool: false,
      });
    }
    // A subscription signing with ed25519 (v1a): its receiver holds only the public key.
    ed25519Subscription = (await d.subscribe(d.addresses[1]!, {
      attr: { address: d.addresses[1], chain: 'DEVNET', url: ed25519Url },
      mempool: false,
      signature: 'ed25519',
    })) as unknown as typeof ed25519Subscription;
    expressApp.post(
      '/ed25519-hooks',
      expressReceiver({
        secret: ed25519Subscription.publicKey,
        handler: async (event, context) => {
          ed25519Events.push({ event, context, threw: false });
        },
      }),
    );
    expressApp.post(
      '/hooks',
      expressReceiver({
        secret: subs.express.secret,
        handler: handlerFor('express'),
        onError: onErrorFor('express'),
      }),
    );
    // A registry's endpoint has a secret of its own, given when the registry is created: until
    // then this route refuses, and the service retries.
    expressApp.post('/registry-hooks', (req, res, next) =>
      registryReceiver ? registryReceiver(req, res, next) : res.status(503).end(),
    );

    fastifyApp = Fastify({
      serverFactory: (handler) => {
        fastifyRoute = handler;
        return fastifyServer;
      },
    });
    // The application's own JSON routes beside it keep their parser.
    fastifyApp.post('/echo', async (request) => request.body);
    await fastifyApp.register(fastifyReceiver, {
      path: '/hooks',
      secret: subs.fastify.secret,
      handler: handlerFor('fastify'),
      onError: onErrorFor('fastify'),
    });
    await fastifyApp.ready();
  });

  afterAll(async () => {
    await fastifyApp?.close();
    for (const server of servers) {
      server.closeAllConnections();
      await new Promise((resolve) => server.close(resolve));
    }
    await d?.close();
  });

  let transfer: { hash: Hex; block: bigint };

  test('a devnet transfer reaches both handlers verified and typed, and the service records it acknowledged', async () => {
    transfer = await d.send(0, d.addresses[1]!, parseEther('1.25'));
    for (const kind of KINDS) {
      const [first] = await waitFor(
        () => {
          const got = handled[kind].filter(
            (h) => !isRegistryEvent(h.event) && h.event.txId === transfer.hash,
          );
          return got.length > 0 ? got : undefined;
        },
        `${kind}'s handler to get the transfer`,
        15_000,
      );
      const { event, context } = first!;
      if (isRegistryEvent(event)) throw new Error('an address notification was expected');
      expect(event).toMatchObject({
        address: d.addresses[0],
        counterAddress: d.addresses[1],
        watchedAddress: d.addresses[1],
        txId: transfer.hash,
        type: 'native',
        asset: 'ETH',
        amount: '-1.25',
        blockNumber: Number(transfer.block),
        mempool: false,
        chain: 'DEVNET',
        subscriptionId: subs[kind].id,
      });
      expect(context).toMatchObject({ id: event.id, eventType: 'address.transaction' });
      expect(Math.abs(context.timestamp.getTime() - Date.now())).toBeLessThan(60_000);
      expect(undocumented({ $ref: '#/components/schemas/AddressTransactionEvent' }, event)).toEqual([]);
      expect(validateEvent('WebhookEvent', event)).toEqual([]);

      const entry = await loggedWhen(kind, transfer.hash, (n) => n.state === 'delivered');
      expect(entry.attempts.map((a) => [a.statusCode, a.response])).toEqual([[200, '{"status":"success"}']]);
    }
  });

  test('an ed25519 subscription is verified by the middleware with its whpk_ public key alone', async () => {
    expect(ed25519Subscription.publicKey).toMatch(/^whpk_/);
    expect(ed25519Subscription.secret).toBeUndefined();
    const [got] = await waitFor(
      () => {
        const found = ed25519Events.filter(
          (h) => !isRegistryEvent(h.event) && h.event.txId === transfer.hash,
        );
        return found.length > 0 ? found : undefined;
      },
      'the ed25519 receiver to get the transfer',
      15_000,
    );
    expect(got!.event).toMatchObject({ txId: transfer.hash, subscriptionId: ed25519Subscription.id });
    const res = await d.t.request(
      'GET',
      `/api/v1/subscription/${ed25519Subscription.id}/notifications?limit=100`,
    );
    const entry = (res.body as { data: Logged[] }).data.find((n) => n.payload.txId === transfer.hash);
    expect(entry?.attempts.map((a) => [a.statusCode, a.response])).toEqual([[200, '{"status":"success"}']]);

    // The same delivery signed with an HMAC secret instead does not pass an ed25519 verifier.
    const body = JSON.stringify(got!.event);
    const at = new Date();
    const forged = new Webhook(subs.express.secret).sign(got!.context.id, at, body);
    const refused = await fetch(urls.express.replace(/hooks$/, 'ed25519-hooks'), {
      method: 'POST',
      headers: {
        'content-type': 'application/json',
        'webhook-id': got!.context.id,
        'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
        'webhook-signature': forged,
      },
      body,
    });
    expect(refused.status).toBe(401);
    expect(ed25519Events).toHaveLength(1);
  });

  test('a resend reaches the receiver again and is acknowledged without calling the handler again', async () => {
    for (const kind of KINDS) {
      const [entry] = (await log(kind)).filter((n) => n.payload.txId === transfer.hash);
      const resent = await d.t.request('POST', `/api/v1/notification/${entry!.id}/resend`);
      expect(resent.status, resent.text).toBe(202);
      const after = await loggedWhen(
        kind,
        transfer.hash,
        (n) => n.attempts.length === 2 && n.state === 'delivered',
      );
      const attempts = [...after.attempts].sort((a, b) => a.attempt - b.attempt);
      expect(attempts.map((a) => [a.trigger, a.statusCode, a.response])).toEqual([
        ['scheduled', 200, '{"status":"success"}'],
        ['resend', 200, '{"status":"success"}'],
      ]);
      expect(handledFor(kind, entry!.id)).toHaveLength(1);
    }
  });

  test('a tampered body, another secret, a stale timestamp or no signature is 401, and reaches no handler', async () => {
    for (const kind of KINDS) {
      const before = handled[kind].length;
      const body = JSON.stringify({ ...handled[kind][0]!.event, id: crypto.randomUUID() });
      const post = async (payload: string, headers: Record<string, string>) => {
        const res = await fetch(urls[kind], {
          method: 'POST',
          headers: { 'content-type': 'application/json', ...headers },
          body: payload,
        });
        return { status: res.status, text: await res.text() };
      };
      const signed = (secret: string, payload: string, secondsAgo = 0) => {
        const id = crypto.randomUUID();
        const at = new Date(Date.now() - secondsAgo * 1000);
        return {
          'webhook-id': id,
          'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
          'webhook-signature': new Webhook(secret).sign(id, at, payload),
        };
      };
      const otherSecret = `whsec_${Buffer.from(crypto.getRandomValues(new Uint8Array(32))).toString('base64')}`;
      const refused = await Promise.all([
        post(body.replace('"-1.25"', '"-125"'), signed(subs[kind].secret, body)),
        post(body, signed(otherSecret, body)),
        post(body, signed(subs[kind].secret, body, 6 * 60)),
        post(body, {}),
      ]);
      expect(refused.map((r) => r.status)).toEqual([401, 401, 401, 401]);
      expect(refused.map((r) => (JSON.parse(r.text) as { detail: string }).detail)).toEqual([
        expect.stringMatching(/no signature .* matches/),
        expect.stringMatching(/no signature .* matches/),
        expect.stringMatching(/s old, beyond the tolerance of 300 s/),
        expect.stringMatching(/are required/),
      ]);
      expect(handled[kind]).toHaveLength(before);
      // The same request signed properly is taken: the 401s above were the signatures' doing.
      const accepted = await post(body, signed(subs[kind].secret, body));
      expect(accepted).toEqual({ status: 200, text: '{"status":"success"}' });
      expect(handled[kind]).toHaveLength(before + 1);
    }
    // The fastify application's other routes still parse JSON.
    const echo = await fetch(urls.fastify.replace(/hooks$/, 'echo'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"a":1}',
    });
    expect(await echo.json()).toEqual({ a: 1 });
  });

  test('a handler that throws answers 500; the service retries, and the retry reaches the handler', async () => {
    failures.express = 1;
    failures.fastify = 1;
    const retried = await d.send(0, d.addresses[1]!, parseEther('0.5'));
    for (const kind of KINDS) {
      const entry = await loggedWhen(kind, retried.hash, (n) => n.state === 'delivered');
      const attempts = [...entry.attempts].sort((a, b) => a.attempt - b.attempt);
      expect(attempts.map((a) => [a.trigger, a.statusCode])).toEqual([
        ['scheduled', 500],
        ['retry', 200],
      ]);
      expect(handledFor(kind, entry.id).map((h) => h.threw)).toEqual([true, false]);
      expect(reported[kind]).toEqual([`${entry.id}: the handler failed, as this test asked`]);
    }
  });

  test('a test notification and registry events arrive typed, matching their schemas', async () => {
    const tested = await d.t.request('POST', `/api/v1/subscription/${subs.express.id}/test`);
    expect(tested.status, tested.text).toBe(202);
    const sample = await waitFor(
      () => handled.express.find((h) => isTest(h.event)),
      'the test notification',
      15_000,
    );
    expect(sample.context.eventType).toBe('test');
    expect(undocumented({ $ref: '#/components/schemas/TestEvent' }, sample.event)).toEqual([]);
    expect(validateEvent('TestEvent', sample.event)).toEqual([]);

    const created = await d.t.request('POST', '/api/v1/registry/create', {
      body: {
        title: 'Concert ticket, row 7',
        folder_id: 'tickets',
        template: 'PASS',
        metadata: [],
        callback_url: registryUrl,
      },
    });
    expect(created.status, created.text).toBe(201);
    const registry = (created.body as { data: { id: string; secret: string } }).data;
    registryReceiver = expressReceiver({
      secret: registry.secret,
      handler: (event, context) => {
        registryEvents.push({ event, context, threw: false });
      },
    });
    const revoked = await d.t.request('POST', `/api/v1/registry/${registry.id}/revoke`);
    expect(revoked.status, revoked.text).toBe(200);
    await waitFor(() => (registryEvents.length >= 2 ? true : undefined), 'two registry events', 15_000);
    const byType = Object.fromEntries(registryEvents.map((h) => [h.context.eventType, h.event]));
    expect(Object.keys(byType).sort()).toEqual(['registry.created', 'registry.revoked']);
    expect(byType['registry.created']).toMatchObject({
      type: 'registry.created',
      registry: { id: registry.id, template: 'PASS', folder_id: 'tickets', data_encrypted: false },
    });
    expect(byType['registry.revoked']).toMatchObject({ registry: { id: registry.id, template: 'PASS' } });
    for (const [type, schema] of [
      ['registry.created', 'RegistryCreatedEvent'],
      ['registry.revoked', 'RegistryRevokedEvent'],
    ] as const) {
      const event = byType[type] as unknown as Record<string, unknown>;
      expect(undocumented({ $ref: `#/components/schemas/${schema}` }, event)).toEqual([]);
      expect(validateEvent(schema, event)).toEqual([]);
    }
  });

  test('a contract event arrives typed as contract.log, decoded, matching its schema, and a resend is deduplicated', async () => {
    // A receiver of its own: the subscription's secret comes with it, after its URL is known.
    const eventsApp = express();
    const eventsServer = http.createServer(eventsApp);
    servers.push(eventsServer);
    const url = `${await listen(eventsServer)}/contract-hooks`;
    const zoo = await d.deploy('EventZoo');
    const created = await d.t.request('POST', '/api/v1/subscription', {
      body: {
        type: 'CONTRACT_LOG_EVENT',
        attr: {
          chain: 'DEVNET',
          url,
          event: 'event Ping(address indexed from, uint256 indexed n, string note)',
          contractAddress: zoo,
        },
      },
    });
    expect(created.status, created.text).toBe(201);
    const sub = created.body as Created;
    const got: Handled[] = [];
    eventsApp.post(
      '/contract-hooks',
      expressReceiver({
        secret: sub.secret,
        handler: (event, context) => {
          got.push({ event, context, threw: false });
        },
      }),
    );

    const from = d.addresses[2]!;
    const { hash, block } = await d.call(1, zoo, 'EventZoo', 'emitPing', [from, 7n, 'héllo 🦊']);
    const [first] = await waitFor(() => (got.length > 0 ? got : undefined), 'the contract event', 15_000);
    const { event, context } = first!;
    if (!isContractLog(event)) throw new Error('a contract event was expected');
    expect(context).toEqual({ id: event.id, timestamp: expect.any(Date), eventType: 'contract.log' });
    expect(event).toMatchObject({
      chain: 'DEVNET',
      contractAddress: zoo,
      txId: hash,
      blockNumber: Number(block),
      event: 'Ping',
      signature: 'Ping(address,uint256,string)',
      args: { from, n: '7', note: 'héllo 🦊' },
      subscriptionId: sub.id,
      confirmations: 1,
    });
    expect(event.topics).toHaveLength(3);
    expect(event.reorg).toBeUndefined();
    expect(undocumented({ $ref: '#/components/schemas/ContractLogEvent' }, event)).toEqual([]);
    expect(validateEvent('ContractLogEvent', event)).toEqual([]);
    expect(validateEvent('WebhookEvent', event)).toEqual([]);

    // The service records it acknowledged; resent, it is acknowledged again without a second call.
    const logOf = async () =>
      (
        (await d.t.request('GET', `/api/v1/subscription/${sub.id}/notifications?limit=100`)).body as {
          data: Logged[];
        }
      ).data;
    const delivered = await waitFor(async () => {
      const [entry] = await logOf();
      return entry?.state === 'delivered' ? entry : undefined;
    }, 'the contract event delivered');
    expect(delivered.id).toBe(event.id);
    const resent = await d.t.request('POST', `/api/v1/notification/${event.id}/resend`);
    expect(resent.status, resent.text).toBe(202);
    const again = await waitFor(async () => {
      const [entry] = await logOf();
      return entry?.attempts.length === 2 && entry.state === 'delivered' ? entry : undefined;
    }, 'the resend delivered');
    expect(again.attempts.map((a) => [a.statusCode, a.response])).toEqual([
      [200, '{"status":"success"}'],
      [200, '{"status":"success"}'],
    ]);
    expect(got).toHaveLength(1);
  });

  test('the committed types (src/openapi.ts) are what openapi-typescript makes of the served document', async () => {
    // When this fails: npm run generate-types -w @ledgerhook/receiver -- http://127.0.0.1:8080/openapi.json
    expect(await webhookTypes(doc as never)).toBe(fs.readFileSync(GENERATED_FILE, 'utf8'));
  });
});
