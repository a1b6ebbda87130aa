import pino, { type DestinationStream, type Logger, type LoggerOptions } from 'pino';
import pinoPretty from 'pino-pretty';
import type { Config } from '../config.js';
import { urlSecretRedactor } from '../shared/url-secrets.js';

/**
 * The service's log at the configured level. Node URLs often carry a provider's API key (in the
 * path, the query or the user part), and libraries quote the URL in their errors: below `debug`,
 * every line has those parts blanked out (see shared/url-secrets.ts). At `debug` and `trace` the
 * operator asked for everything, and gets it.
 */
export function createServiceLogger(config: Config, destination?: DestinationStream): Logger {
  const urls = config.networks.list().flatMap((n) => [...n.rpcUrls, ...n.wsUrls, ...n.indexerUrls]);
  if (config.risk?.url) urls.push(config.risk.url);
  const verbose = config.logLevel === 'debug' || config.logLevel === 'trace';
  const redact = verbose ? undefined : urlSecretRedactor(urls);
  const options: LoggerOptions = {
    level: config.logLevel,
    ...(redact ? { hooks: { streamWrite: redact } } : {}),
  };
  if (destination) return pino(options, destination);
  // For a person at a terminal: a line of time, level, message and fields, from the same JSON
  // (so redacted the same way), written synchronously as pino's own destination is.
  const pretty = (config.logFormat ?? (process.stdout.isTTY ? 'pretty' : 'json')) === 'pretty';
  if (!pretty) return pino(options);
  return pino(
    options,
    pinoPretty({
      sync: true,
      colorize: process.stdout.isTTY === true,
      translateTime: 'SYS:yyyy-mm-dd HH:MM:ss.l',
      ignore: 'pid,hostname',
    }),
  );
}
