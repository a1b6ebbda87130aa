/**
 * Contract event subscriptions (CONTRACT_LOG_EVENT) in the console: what one follows, in a few
 * words or in full; the create form's event fields and how they become the request's `attr`; and
 * a `contract.log` delivery summed up (event, contract, arguments) for the delivery log.
 */
import type { Problem, Subscription } from './client';
import { errorsAt, shortText, TextField } from './ui';

export const CONTRACT_LOG_EVENT = 'CONTRACT_LOG_EVENT';

type Attr = Subscription['attr'];

/** The event's name alone (`Transfer`), or the topic0 shortened. */
function eventName(attr: Attr): string {
  if (attr.signature) return attr.signature.slice(0, attr.signature.indexOf('('));
  return attr.topic0 ? `topic0 ${shortText(attr.topic0)}` : 'event';
}

/** Where the event is followed: one contract, a list of them, or any contract. */
export function contractsLabel(attr: Attr, short = true): string {
  if (attr.anyContract) return 'any contract';
  if (attr.contractAddress) return short ? shortText(attr.contractAddress) : attr.contractAddress;
  const count = attr.addressCount ?? 0;
  return count === 1 ? '1 contract' : `${count} contracts`;
}

/** One filter value in a few characters: an address or a hash by its two ends. */
function plainValue(value: unknown): string {
  if (typeof value === 'string') return /^0x[0-9a-fA-F]{17,}$/.test(value) ? shortText(value) : value;
  return JSON.stringify(value);
}

/** The filter as `to = 0x70997970…dc79c8 | 0x3C44Cd…93BC, n = 7`, or undefined without one. */
export function filterLabel(attr: Attr): string | undefined {
  const entries = Object.entries(attr.filter ?? {});
  if (entries.length === 0) return undefined;
  return entries
    .map(
      ([name, value]) => `${name} = ${(Array.isArray(value) ? value : [value]).map(plainValue).join(' | ')}`,
    )
    .join(', ');
}

/** An event subscription for a table cell or a choice: `DEVNET Ping on 0x5FbDB2…180aa3`. */
export function describeEventSubscription(attr: Attr): string {
  return `${attr.chain ?? ''} ${eventName(attr)} on ${contractsLabel(attr)}`.trim();
}

/** The list's "Watches" cell of an event subscription: the event (a link) and where, with its filter. */
export function EventWatches(props: { s: Subscription }) {
  const { attr } = props.s;
  const filter = filterLabel(attr);
  return (
    <>
      <a href={`#/subscriptions/${props.s.id}`} class="mono" title={attr.topic0 ?? undefined}>
        {attr.signature ?? (attr.topic0 ? `topic0 ${shortText(attr.topic0)}` : 'event')}
      </a>
      <br />
      <span class="muted">
        on {contractsLabel(attr)}
        {filter && <> · where {filter}</>}
      </span>
    </>
  );
}

/** The facts of an event subscription's page: the event, its topic0, its contracts, its filter, its ABI. */
export function EventFacts(props: { attr: Attr }) {
  const { attr } = props;
  return (
    <>
      <div>
        <dt>Event</dt>
        <dd class="mono">
          {attr.signature ?? <span class="muted">not decoded: subscribed by its topic0 alone</span>}
        </dd>
      </div>
      <div>
        <dt>Topic0</dt>
        <dd class="mono">{attr.topic0 ?? <span class="muted">none (an anonymous event)</span>}</dd>
      </div>
      <div>
        <dt>Contracts</dt>
        <dd class="mono">{contractsLabel(attr, false)}</dd>
      </div>
      <div>
        <dt>Filter</dt>
        <dd class="mono">{attr.filter ? JSON.stringify(attr.filter) : <span class="muted">none</span>}</dd>
      </div>
      {typeof attr.event === 'object' && (
        <div class="wide">
          <dt>ABI fragment</dt>
          <dd>
            <details>
              <summary>As parsed by the service</summary>
              <pre class="json">{JSON.stringify(attr.event, null, 2)}</pre>
            </details>
          </dd>
        </div>
      )}
    </>
  );
}

/** The create form's event fields, as typed. */
export interface EventInput {
  event: string;
  /** Contract addresses separated by spaces, commas or new lines; none for any contract. */
  contracts: string;
  /** A JSON object, or nothing. */
  filter: string;
}

/** The create form's fields of a contract event: the event, the contracts, the filter. */
export function EventFields(props: {
  value: EventInput;
  onValue: (value: EventInput) => void;
  problem: Problem | undefined;
}) {
  const { value, problem } = props;
  const set = (change: Partial<EventInput>) => props.onValue({ ...value, ...change });
  return (
    <>
      <TextField
        label="Event"
        rows={3}
        verbatim
        value={value.event}
        onValue={(event) => set({ event })}
        errors={errorsUnder(problem, '#/attr/event')}
        hint={
          <>
            A signature (<code>event Transfer(address indexed from, address indexed to, uint256 value)</code>
            ), a JSON ABI fragment, or a bare topic0 (nothing decoded)
          </>
        }
      />
      <TextField
        label="Contracts"
        rows={2}
        verbatim
        value={value.contracts}
        onValue={(contracts) => set({ contracts })}
        errors={[...errorsAt(problem, '#/attr/contractAddress'), ...errorsUnder(problem, '#/attr/addresses')]}
        hint="One address, or several separated by spaces or new lines; empty: any contract"
      />
      <TextField
        label="Filter"
        rows={2}
        verbatim
        value={value.filter}
        onValue={(filter) => set({ filter })}
        errors={errorsUnder(problem, '#/attr/filter')}
        hint={
          <>
            Optional, on indexed arguments by name: <code>{'{"to": ["0x…", "0x…"], "n": "7"}'}</code>
          </>
        }
      />
    </>
  );
}

/**
 * The API's messages for the field at `pointer`, those of a part of it (`#/attr/filter/to/1`) led
 * by where in it they are (`to/1: …`), as a filter or a fragment has parts a message must name.
 */
function errorsUnder(problem: Problem | undefined, pointer: string): string[] {
  return (problem?.errors ?? []).flatMap((e) => {
    if (e.pointer === pointer) return [e.detail];
    if (e.pointer?.startsWith(`${pointer}/`)) return [`${e.pointer.slice(pointer.length + 1)}: ${e.detail}`];
    return [];
  });
}

/** The pointers the event fields show messages for. */
export const EVENT_POINTERS = ['#/type', '#/attr/event', '#/attr/contractAddress', '#/attr/filter'];

/** A field error found before asking the API: JSON that does not parse. */
export class InputProblem extends Error {
  constructor(
    readonly pointer: string,
    readonly detail: string,
  ) {
    super(detail);
  }
}

/** `attr` of a CONTRACT_LOG_EVENT request from the fields; what cannot be sent throws an InputProblem. */
export function eventAttr(input: EventInput, chain: string, url: string) {
  const text = input.event.trim();
  let event: string | Record<string, unknown> = text;
  // A JSON fragment is sent as an object; anything else is the API's to judge as a signature or topic0.
  if (text.startsWith('{')) event = parseObject(text, '#/attr/event', 'a JSON ABI fragment');
  const contracts = input.contracts
    .split(/[\s,]+/)
    .map((a) => a.trim())
    .filter(Boolean);
  const filter = input.filter.trim()
    ? parseObject(input.filter, '#/attr/filter', 'a JSON object')
    : undefined;
  return {
    chain,
    url,
    event,
    ...(contracts.length === 1 ? { contractAddress: contracts[0] } : {}),
    ...(contracts.length > 1 ? { addresses: contracts } : {}),
    ...(filter ? { filter } : {}),
  };
}

function parseObject(text: string, pointer: string, what: string): Record<string, unknown> {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch (err) {
    throw new InputProblem(pointer, `is not valid JSON (${(err as Error).message}); write ${what}`);
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    throw new InputProblem(pointer, `must be ${what}, in braces`);
  return value as Record<string, unknown>;
}

/** A decoded argument in a few characters: integers and booleans as they are, text quoted, hex by its ends. */
function argText(value: unknown, depth = 0): string {
  if (typeof value === 'string') {
    if (/^0x[0-9a-fA-F]*$/.test(value)) return shortText(value);
    if (/^-?\d+$/.test(value)) return value.length > 24 ? `${value.slice(0, 10)}…${value.slice(-6)}` : value;
    return JSON.stringify(value.length > 32 ? `${value.slice(0, 32)}…` : value);
  }
  if (Array.isArray(value)) {
    if (depth > 0) return `[${value.length}]`;
    const shown = value.slice(0, 3).map((v) => argText(v, depth + 1));
    return `[${shown.join(', ')}${value.length > 3 ? ', …' : ''}]`;
  }
  if (value !== null && typeof value === 'object') {
    if (depth > 0) return '{…}';
    const entries = Object.entries(value);
    const shown = entries.slice(0, 3).map(([k, v]) => `${k}: ${argText(v, depth + 1)}`);
    return `{${shown.join(', ')}${entries.length > 3 ? ', …' : ''}}`;
  }
  return String(value);
}

/** The arguments of a decoded log as `from=0xf39Fd6…b92266, n=7, note="hello"` (the first six). */
function argsSummary(args: Record<string, unknown>): string {
  const entries = Object.entries(args);
  const shown = entries.slice(0, 6).map(([name, value]) => `${name}=${argText(value)}`);
  return entries.length > 6 ? `${shown.join(', ')}, … (${entries.length - 6} more)` : shown.join(', ');
}

/**
 * The parts of a `contract.log` body's line in the log: the event (or its topic0), the contract,
 * the arguments (or, undecoded, how many topics and bytes of data), the log's place.
 */
export function contractLogParts(body: Record<string, unknown>): string[] {
  const text = (key: string) => (typeof body[key] === 'string' ? (body[key] as string) : undefined);
  const topics = Array.isArray(body.topics) ? (body.topics as string[]) : [];
  const parts = [text('event') ?? (topics[0] ? `topic0 ${shortText(topics[0])}` : 'anonymous event')];
  const contract = text('contractAddress');
  if (contract) parts.push(`contract ${shortText(contract)}`);
  const args = body.args;
  if (args !== null && typeof args === 'object' && !Array.isArray(args)) {
    const summary = argsSummary(args as Record<string, unknown>);
    if (summary) parts.push(summary);
  } else {
    const data = text('data') ?? '0x';
    parts.push(`${topics.length} topics, ${(data.length - 2) / 2} bytes of data`);
  }
  return parts;
}
