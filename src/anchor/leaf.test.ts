import { createHash } from 'node:crypto';
import { describe, expect, test } from 'vitest';
import { leafOf, newSalt } from './leaf.js';

describe('registry leaves', () => {
  test('salts are 32 random bytes each, never one handed out twice, across the draws they come from', () => {
    const salts = Array.from({ length: 1_000 }, () => newSalt());
    for (const salt of salts) expect(salt).toMatch(/^[0-9a-f]{64}$/);
    expect(new Set(salts).size).toBe(salts.length);
    // Not a counter or a shifted window of one draw: no two salts share a 16-byte half.
    const halves = salts.flatMap((s) => [s.slice(0, 32), s.slice(32)]);
    expect(new Set(halves).size).toBe(halves.length);
  });

  test('a leaf is SHA-256 of the salt bytes followed by the RFC 8785 JSON of the document', () => {
    const salt = newSalt();
    const document = {
      id: '6f1c2a9e-0000-4000-8000-000000000001',
      created_at: '2026-11-26T10:00:00.000Z',
      title: 'Zeugnis ü',
      description: null,
      folder_id: 'f',
      template: 'STORAGE',
      metadata: [{ value: '1e3', type: 'NUMBER' }],
      callback_url: null,
      data_encrypted: false,
    };
    const canonical =
      '{"callback_url":null,"created_at":"2026-11-26T10:00:00.000Z","data_encrypted":false,"description":null,' +
      '"folder_id":"f","id":"6f1c2a9e-0000-4000-8000-000000000001","metadata":[{"type":"NUMBER","value":"1e3"}],' +
      '"template":"STORAGE","title":"Zeugnis ü"}';
    const expected = createHash('sha256')
      .update(Buffer.from(salt, 'hex'))
      .update(canonical, 'utf8')
      .digest('hex');
    expect(leafOf(salt, document)).toBe(expected);
  });
});
