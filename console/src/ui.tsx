/** Pieces every view uses: loading with errors, problem details, form fields, times, badges. */
import type { ComponentChildren } from 'preact';
import { useCallback, useEffect, useId, useRef, useState } from 'preact/hooks';
import { type Problem, problemOf } from './client';

export interface Loaded<T> {
  data: T | undefined;
  problem: Problem | undefined;
  loading: boolean;
  reload: () => Promise<void>;
}

/**
 * Runs `load` when `key` changes (and on `reload`); only the latest call's answer is kept, so a
 * slow answer to an old filter never replaces a newer one.
 */
export function useLoaded<T>(load: () => Promise<T>, key: string): Loaded<T> {
  const [data, setData] = useState<T | undefined>(undefined);
  const [problem, setProblem] = useState<Problem | undefined>(undefined);
  const [loading, setLoading] = useState(true);
  const latest = useRef(0);
  const loadRef = useRef(load);
  loadRef.current = load;
  const reload = useCallback(async () => {
    const call = ++latest.current;
    setLoading(true);
    try {
      const value = await loadRef.current();
      if (call !== latest.current) return;
      setData(value);
      setProblem(undefined);
    } catch (err) {
      if (call !== latest.current) return;
      setProblem(problemOf(err));
    } finally {
      if (call === latest.current) setLoading(false);
    }
  }, []);
  useEffect(() => {
    void reload();
  }, [key, reload]);
  return { data, problem, loading, reload };
}

/** Calls `tick` every `ms` while the page is visible (a hidden tab asks the service nothing). */
export function useEvery(ms: number, tick: () => void, enabled = true): void {
  const tickRef = useRef(tick);
  tickRef.current = tick;
  useEffect(() => {
    if (!enabled) return;
    const timer = setInterval(() => {
      if (document.visibilityState === 'visible') tickRef.current();
    }, ms);
    return () => clearInterval(timer);
  }, [ms, enabled]);
}

/** A problem as the API sent it: its detail, and each field error that no form field shows. */
export function ProblemAlert(props: { problem: Problem | undefined; shown?: (pointer: string) => boolean }) {
  const { problem, shown } = props;
  if (!problem) return null;
  const rest = (problem.errors ?? []).filter((e) => !(e.pointer && shown?.(e.pointer)));
  return (
    <div class="alert" role="alert">
      <strong>{problem.title}</strong> {problem.detail}
      {rest.length > 0 && (
        <ul>
          {rest.map((e) => (
            <li key={`${e.pointer ?? e.parameter ?? e.header}:${e.detail}`}>
              <code>{e.pointer ?? e.parameter ?? e.header}</code> {e.detail}
            </li>
          ))}
        </ul>
      )}
    </div>
  );
}

/** The API's messages for the field at `pointer` and anything inside it (`#/attr/addresses/3`). */
export function errorsAt(problem: Problem | undefined, pointer: string): string[] {
  return (problem?.errors ?? [])
    .filter((e) => e.pointer === pointer || e.pointer?.startsWith(`${pointer}/`))
    .map((e) => e.detail);
}

/** A labelled form control with the API's messages for it, tied together for screen readers. */
export function Field(props: {
  label: string;
  hint?: ComponentChildren;
  errors?: string[];
  children: (attrs: {
    id: string;
    'aria-invalid': boolean;
    'aria-describedby'?: string;
  }) => ComponentChildren;
}) {
  const id = useId();
  const errors = props.errors ?? [];
  const described = [props.hint ? `${id}-hint` : '', errors.length > 0 ? `${id}-error` : '']
    .filter(Boolean)
    .join(' ');
  return (
    <div class={errors.length > 0 ? 'field invalid' : 'field'}>
      <label for={id}>{props.label}</label>
      {props.children({
        id,
        'aria-invalid': errors.length > 0,
        ...(described ? { 'aria-describedby': described } : {}),
      })}
      {props.hint && (
        <p class="hint" id={`${id}-hint`}>
          {props.hint}
        </p>
      )}
      {errors.length > 0 && (
        <p class="field-error" id={`${id}-error`}>
          {errors.join('; ')}
        </p>
      )}
    </div>
  );
}

/** A labelled choice among `options` ([value, text] pairs), with the API's messages for it. */
export function SelectField<T extends string>(props: {
  label: string;
  value: T;
  onValue: (value: T) => void;
  options: [T, string][];
  errors?: string[];
  hint?: string;
}) {
  return (
    <Field label={props.label} errors={props.errors} hint={props.hint}>
      {(attrs) => (
        <select {...attrs} value={props.value} onChange={(e) => props.onValue(e.currentTarget.value as T)}>
          {props.options.map(([value, text]) => (
            <option key={value} value={value}>
              {text}
            </option>
          ))}
        </select>
      )}
    </Field>
  );
}

/** Where a list paged by cursor stands: this page's cursor and those of the pages before it. */
export interface Pages {
  cursor: string | undefined;
  newer(): void;
  older(next: string): void;
  /** Back to the first page, as a changed filter must. */
  reset(): void;
  first: boolean;
}

export function usePages(): Pages {
  const [before, setBefore] = useState<(string | undefined)[]>([]);
  const [cursor, setCursor] = useState<string | undefined>(undefined);
  return {
    cursor,
    first: before.length === 0,
    newer() {
      const rest = [...before];
      setCursor(rest.pop());
      setBefore(rest);
    },
    older(next) {
      setBefore([...before, cursor]);
      setCursor(next);
    },
    reset() {
      setBefore([]);
      setCursor(undefined);
    },
  };
}

/** Newer and Older buttons under a list; `next` is the next_cursor of the page shown. */
export function Pager(props: { label: string; pages: Pages; next: string | null | undefined }) {
  const { pages, next } = props;
  return (
    <nav class="pager" aria-label={props.label}>
      <button type="button" disabled={pages.first} onClick={pages.newer}>
        Newer
      </button>
      <button type="button" disabled={!next} onClick={() => next && pages.older(next)}>
        Older
      </button>
    </nav>
  );
}

/** A labelled text box bound to a string (a textarea when given `rows`), with the API's messages for it. */
export function TextField(props: {
  label: string;
  value: string;
  onValue: (value: string) => void;
  errors?: string[];
  hint?: ComponentChildren;
  type?: 'text' | 'url' | 'number' | 'password';
  rows?: number;
  /** Addresses, tokens, keys: neither spell-checked nor remembered by the browser. */
  verbatim?: boolean;
}) {
  const { type = 'text', verbatim = false } = props;
  const onInput = (e: { currentTarget: { value: string } }) => props.onValue(e.currentTarget.value);
  return (
    <Field label={props.label} errors={props.errors} hint={props.hint}>
      {(attrs) =>
        props.rows ? (
          <textarea
            {...attrs}
            rows={props.rows}
            value={props.value}
            spellcheck={!verbatim}
            onInput={onInput}
          />
        ) : (
          <input
            {...attrs}
            // Preact types each input type's attributes apart; these four take the same ones here.
            type={type as 'text'}
            value={props.value}
            spellcheck={!verbatim}
            autoComplete={verbatim ? 'off' : undefined}
            inputMode={type === 'number' ? 'numeric' : undefined}
            onInput={onInput}
          />
        )
      }
    </Field>
  );
}

const pad = (n: number) => String(n).padStart(2, '0');

/** A time in the browser's time zone, to the second; the exact instant is in the title. */
export function Time(props: { at: string | null | undefined }) {
  if (!props.at) return <span class="muted">—</span>;
  const d = new Date(props.at);
  const text = `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
  return (
    <time dateTime={props.at} title={props.at}>
      {text}
    </time>
  );
}

/** The value of a datetime-local input as an ISO 8601 instant (undefined when empty or invalid). */
export function localToIso(value: string): string | undefined {
  if (!value) return undefined;
  const d = new Date(value);
  return Number.isNaN(d.getTime()) ? undefined : d.toISOString();
}

/** The browser's offset from UTC, as the time filters read times. */
export function zoneLabel(): string {
  const minutes = -new Date().getTimezoneOffset();
  if (minutes === 0) return 'UTC';
  const sign = minutes > 0 ? '+' : '-';
  const abs = Math.abs(minutes);
  return `UTC${sign}${pad(Math.floor(abs / 60))}:${pad(abs % 60)}`;
}

/**
 * A table with a caption and column headers (what a screen reader announces for each cell), and
 * one row saying why it is empty when `empty` is given.
 */
export function Table(props: {
  caption: ComponentChildren;
  columns: string[];
  empty?: ComponentChildren;
  class?: string;
  children: ComponentChildren;
}) {
  return (
    <table class={props.class}>
      <caption>{props.caption}</caption>
      <thead>
        <tr>
          {props.columns.map((c) => (
            <th scope="col" key={c}>
              {c}
            </th>
          ))}
        </tr>
      </thead>
      <tbody>
        {props.empty && (
          <tr>
            <td colSpan={props.columns.length} class="muted">
              {props.empty}
            </td>
          </tr>
        )}
        {props.children}
      </tbody>
    </table>
  );
}

export function Badge(props: { value: string }) {
  return (
    <span class={`badge badge-${props.value.replace(/[^a-z0-9]/gi, '').toLowerCase()}`}>{props.value}</span>
  );
}

/** A secret the service shows once: kept visible until dismissed, with a copy button. */
export function ShownOnce(props: {
  title: string;
  values: [string, string][];
  onDismiss: () => void;
  /** Instead of the default warning, when not everything shown is a secret. */
  note?: string;
}) {
  const [copied, setCopied] = useState<string | undefined>(undefined);
  return (
    <section class="shown-once" aria-label={props.title}>
      <h3>{props.title}</h3>
      <p>{props.note ?? 'Copy it now: the service keeps only a sealed copy and will not show it again.'}</p>
      <dl>
        {props.values.map(([name, value]) => (
          <div key={name}>
            <dt>{name}</dt>
            <dd>
              <code class="secret">{value}</code>{' '}
              <button
                type="button"
                class="small"
                onClick={() => {
                  void navigator.clipboard?.writeText(value).then(() => setCopied(name));
                }}
              >
                {copied === name ? 'Copied' : 'Copy'}
              </button>
            </dd>
          </div>
        ))}
      </dl>
      <button type="button" onClick={props.onDismiss}>
        I have stored it
      </button>
    </section>
  );
}

/** A button that asks once more before doing something that cannot be undone. */
export function ConfirmButton(props: { label: string; confirm: string; onConfirm: () => void }) {
  const [asking, setAsking] = useState(false);
  if (!asking)
    return (
      <button type="button" class="danger" onClick={() => setAsking(true)}>
        {props.label}
      </button>
    );
  return (
    <span class="confirm">
      <button
        type="button"
        class="danger"
        onClick={() => {
          setAsking(false);
          props.onConfirm();
        }}
      >
        {props.confirm}
      </button>
      <button type="button" onClick={() => setAsking(false)}>
        Cancel
      </button>
    </span>
  );
}

/** Text a receiver or a registry holds, shortened for a table cell; the whole of it in the title. */
export function Excerpt(props: { text: string | null | undefined; max?: number }) {
  if (props.text === null || props.text === undefined || props.text === '')
    return <span class="muted">—</span>;
  const max = props.max ?? 120;
  const short = props.text.length > max ? `${props.text.slice(0, max)}…` : props.text;
  return (
    <code class="excerpt" title={props.text.length > max ? props.text.slice(0, 2000) : undefined}>
      {short}
    </code>
  );
}

export function shortId(id: string): string {
  return id.slice(-8);
}

/** A long address or hash as its two ends, enough to tell it apart in a table. */
export function shortText(text: string): string {
  return text.length > 16 ? `${text.slice(0, 8)}…${text.slice(-6)}` : text;
}
