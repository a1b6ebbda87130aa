/**
 * The `lists` risk provider (docs/risk.md has the file format): local files per network, held in
 * memory and reloaded when they change. Changes are seen two ways, because neither is enough alone:
 * `fs.watch` on each file's directory (a file replaced by `mv`, as a cron job should, is seen at
 * once), and a `stat` of the files on a lookup at most every `checkIntervalMs` (for file systems
 * where watching does not work, such as network mounts, and for a watcher that died).
 */
import fs from 'node:fs';
import path from 'node:path';
import type { Logger } from 'pino';
import { RISK_LIST_LIMITS } from '../../risk-config.js';
import { readRegularFile, statRegularFile } from '../../shared/regular-file.js';
import type { RiskProvider } from './provider.js';

export type BadLine = (line: number, text: string, problem: string) => void;

const SCORE = /^\d+(\.\d+)?$/;
/** A file with many bad lines logs the first few and then a count. */
const BAD_LINES_LOGGED = 10;

/** One content line, or a reason it is bad; undefined for a header. */
function parseLine(line: string, first: boolean): { address: string; score: number } | string | undefined {
  if (!line.includes(',')) {
    if (/\s/.test(line)) return 'an address cannot contain spaces';
    return { address: line, score: 100 };
  }
  const fields = line.split(',').map((field) => field.trim());
  if (fields.length !== 2) return 'expected address,risk';
  const [address, risk] = fields as [string, string];
  if (!SCORE.test(risk)) return first ? undefined : `risk "${risk}" is not a number from 0 to 100`;
  if (address === '' || /\s/.test(address)) return 'the address is empty or contains spaces';
  const score = Number(risk);
  if (score > 100) return `risk ${risk} is above 100`;
  return { address, score };
}

/** The scores of one file's text; `normalize` gives the key an address is compared by. */
export function parseRiskList(
  text: string,
  onBadLine: BadLine,
  normalize: (address: string) => string = (a) => a,
): Map<string, number> {
  const scores = new Map<string, number>();
  let first = true;
  text.split(/\r?\n/).forEach((raw, i) => {
    const line = raw.replace(/#.*/, '').trim();
    if (line === '') return;
    const parsed = parseLine(line, first);
    first = false;
    if (parsed === undefined) return;
    if (typeof parsed === 'string') {
      onBadLine(i + 1, raw, parsed);
      return;
    }
    const key = normalize(parsed.address);
    scores.set(key, Math.max(scores.get(key) ?? 0, parsed.score));
  });
  return scores;
}

export interface ListRiskProviderOptions {
  /** List files per network (canonical network names). */
  files: Record<string, readonly string[]>;
  logger?: Pick<Logger, 'warn' | 'info'>;
  /** A lookup checks the files' modification at most this often; 1 s by default. */
  checkIntervalMs?: number;
  /** Watch the files' directories to reload at once; true by default. */
  watch?: boolean;
  /** The key an address is compared by, e.g. lower case for EVM's case-insensitive hex. */
  normalize?: (network: string, address: string) => string;
  /** Named by the error when a file cannot be read at start. */
  variable?: string;
}

interface ListFile {
  network: string;
  path: string;
  /** Identity, size and modification time of what was read, to tell whether it changed. */
  stamp: string;
  scores: Map<string, number>;
  /** Whether the missing file was already reported (once, until it is back). */
  missingReported: boolean;
}

const stampOf = (stat: fs.Stats) => `${stat.ino}:${stat.size}:${stat.mtimeMs}`;

export function createListRiskProvider(options: ListRiskProviderOptions): RiskProvider & {
  close(): Promise<void>;
} {
  const checkIntervalMs = options.checkIntervalMs ?? 1_000;
  const normalize = options.normalize ?? ((_network: string, address: string) => address);
  const variable = options.variable ?? 'LEDGERHOOK_RISK_LISTS';

  function parse(file: Pick<ListFile, 'network' | 'path'>, text: string): Map<string, number> {
    let bad = 0;
    const scores = parseRiskList(
      text,
      (line, content, problem) => {
        bad++;
        if (bad <= BAD_LINES_LOGGED)
          options.logger?.warn({ file: file.path, line, content, problem }, 'risk list: bad line skipped');
      },
      (address) => normalize(file.network, address),
    );
    if (bad > BAD_LINES_LOGGED)
      options.logger?.warn({ file: file.path, badLines: bad }, 'risk list: more bad lines skipped');
    return scores;
  }

  /** At start a list that cannot be read is a configuration error, not an empty list. */
  function loadAtStart(network: string, file: string): ListFile {
    const stamp = stampOf(statRegularFile(file, variable, RISK_LIST_LIMITS.bytes));
    const scores = parse({ network, path: file }, readRegularFile(file, variable, RISK_LIST_LIMITS.bytes));
    return { network, path: file, stamp, scores, missingReported: false };
  }

  const files: ListFile[] = Object.entries(options.files).flatMap(([network, paths]) =>
    paths.map((file) => loadAtStart(network, file)),
  );
  const merged = new Map<string, Map<string, number>>();
  function mergeNetwork(network: string): void {
    const scores = new Map<string, number>();
    for (const file of files.filter((f) => f.network === network)) {
      for (const [key, score] of file.scores) scores.set(key, Math.max(scores.get(key) ?? 0, score));
    }
    merged.set(network, scores);
  }
  for (const network of Object.keys(options.files)) mergeNetwork(network);

  /** Re-reads a file when it changed; a file gone or unreadable keeps its last contents. */
  async function refreshFile(file: ListFile, force: boolean): Promise<boolean> {
    try {
      const stat = await fs.promises.stat(file.path);
      if (!force && stampOf(stat) === file.stamp) return false;
      // Replaced by something that is not a list (a FIFO would block the read, a huge file fill memory).
      if (!stat.isFile() || stat.size > RISK_LIST_LIMITS.bytes)
        throw Object.assign(new Error('not a regular file within the limit'), {
          code: stat.isFile() ? 'EFBIG' : 'ENOTREG',
        });
      const text = await fs.promises.readFile(file.path, 'utf8');
      file.scores = parse(file, text);
      file.stamp = stampOf(stat);
      file.missingReported = false;
      options.logger?.info({ file: file.path, addresses: file.scores.size }, 'risk list reloaded');
      return true;
    } catch (err) {
      if (!file.missingReported) {
        file.missingReported = true;
        const code = (err as NodeJS.ErrnoException).code;
        options.logger?.warn(
          { file: file.path, code },
          'risk list cannot be read: its last contents are kept',
        );
      }
      return false;
    }
  }

  let lastCheck = Date.now();
  let changed = false;
  let running: Promise<void> | undefined;
  let again = false;

  async function refreshAll(): Promise<void> {
    do {
      const force = changed;
      again = false;
      changed = false;
      lastCheck = Date.now();
      const reloaded = await Promise.all(files.map((file) => refreshFile(file, force)));
      const networks = new Set(files.filter((_, i) => reloaded[i]).map((file) => file.network));
      for (const network of networks) mergeNetwork(network);
    } while (again);
  }

  /** One refresh at a time; a change noticed meanwhile runs another right after it. */
  function refresh(): Promise<void> {
    if (running) {
      again = true;
      return running;
    }
    running = refreshAll().finally(() => {
      running = undefined;
    });
    return running;
  }

  const watchers =
    options.watch === false
      ? []
      : watchDirectories(files, options.logger, () => {
          changed = true;
          void refresh();
        });

  return {
    name: 'lists',
    async scores(network, addresses) {
      if (changed || Date.now() - lastCheck >= checkIntervalMs) await refresh();
      const known = merged.get(network);
      const result = new Map<string, number>();
      if (!known) return result;
      for (const address of addresses) {
        const score = known.get(normalize(network, address));
        if (score !== undefined) result.set(address, score);
      }
      return result;
    },
    async close() {
      for (const watcher of watchers) watcher.close();
      await running;
    },
  };
}

/**
 * Watches the directories of the files rather than the files: a file replaced by a rename is a
 * new file, which a watch on the old one would never report.
 */
function watchDirectories(
  files: readonly ListFile[],
  logger: Pick<Logger, 'warn'> | undefined,
  onChange: () => void,
): fs.FSWatcher[] {
  const names = new Map<string, Set<string>>();
  for (const file of files) {
    const dir = path.dirname(file.path);
    names.set(dir, (names.get(dir) ?? new Set()).add(path.basename(file.path)));
  }
  const watchers: fs.FSWatcher[] = [];
  for (const [dir, watched] of names) {
    try {
      // Not persistent: an open watch must not keep the process alive.
      const watcher = fs.watch(dir, { persistent: false }, (_event, name) => {
        if (name === null || watched.has(String(name))) onChange();
      });
      watcher.on('error', (err) => {
        logger?.warn(
          { dir, err: err.message },
          'risk list directory no longer watched: changes are seen by polling',
        );
        watcher.close();
      });
      watchers.push(watcher);
    } catch (err) {
      logger?.warn(
        { dir, err: (err as Error).message },
        'risk list directory cannot be watched: changes are seen by polling',
      );
    }
  }
  return watchers;
}
