import { describe, expect, test } from 'vitest';
import { REDACTED, urlSecretRedactor } from './url-secrets.js';

const NODE = 'https://opsuser:s3cr%2Ft@eth.node.example:8545/v3/0123456789abcdef?apikey=QUERYKEY42&chain=1';

describe('urlSecretRedactor', () => {
  const redact = urlSecretRedactor([NODE, 'https://public.example'])!;

  test('keeps only the scheme and host of a configured node URL quoted in a text', () => {
    const text = `HTTP request failed.\n\nURL: ${NODE}\nRequest body: {"method":"eth_blockNumber"}`;
    expect(redact(text)).toBe(
      `HTTP request failed.\n\nURL: https://eth.node.example:8545/${REDACTED}\nRequest body: {"method":"eth_blockNumber"}`,
    );
  });

  test('blanks the secret parts wherever they appear: echoed by a node, JSON-escaped, decoded, as Basic credentials', () => {
    const basic = Buffer.from('opsuser:s3cr/t').toString('base64');
    const text = JSON.stringify({
      msg: 'cannot serve /v3/0123456789abcdef?apikey=QUERYKEY42 for opsuser',
      auth: `Basic ${basic}`,
      password: 's3cr/t',
    });
    const out = redact(text);
    for (const secret of ['0123456789abcdef', 'QUERYKEY42', 'opsuser', basic])
      expect(out).not.toContain(secret);
    expect(JSON.parse(out).msg).toBe(`cannot serve ${REDACTED}?apikey=${REDACTED} for ${REDACTED}`);
  });

  test('leaves other hosts, plain words and URLs without secrets alone', () => {
    const text =
      'POST /api/v1/registry/create from https://receiver.example/hook?apikey=theirs; https://public.example/';
    expect(redact(text)).toBe(text);
    expect(urlSecretRedactor(['not a url'])).toBeUndefined();
  });

  test('hides a short password inside the URL, without blanking the same letters elsewhere', () => {
    const short = urlSecretRedactor(['http://u:pw@10.0.0.5:8332/'])!;
    expect(short('could not reach http://u:pw@10.0.0.5:8332/ (pw reset)')).toBe(
      `could not reach http://10.0.0.5:8332/${REDACTED} (pw reset)`,
    );
  });
});
