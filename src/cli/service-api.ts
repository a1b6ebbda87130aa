import { type ParsedCommandLine, UsageError } from './usage.js';

export type CommandValues = Extract<ParsedCommandLine, { kind: 'run' }>['values'];

/**
 * The running service's API, for the commands that talk to it over HTTP: --url, else this
 * machine's PORT on loopback; --token, else LEDGERHOOK_TOKEN.
 */
export function serviceApi(
  command: string,
  values: CommandValues,
  port: number,
): { url: string; token: string } {
  const token = values.token ?? process.env.LEDGERHOOK_TOKEN;
  if (!token) throw new UsageError(`${command} needs an API token: --token TOKEN or LEDGERHOOK_TOKEN`);
  return { url: values.url ?? `http://127.0.0.1:${port}`, token };
}
