/**
 * The receipt's JSON Schema: documents it in the OpenAPI document and checks one handed to
 * `POST /registry/verify` or to `ledgerhook verify` (which runs without the service).
 */
import { Type } from 'typebox';
import { Value } from 'typebox/value';
import { RECEIPT_TYPE, type Receipt } from './receipt.js';

const Hash = Type.String({ pattern: '^[0-9a-f]{64}$', description: '32 bytes, lowercase hex' });

export const ReceiptSchema = Type.Object(
  {
    type: Type.Literal(RECEIPT_TYPE),
    registryId: Type.String({ format: 'uuid' }),
    targetHash: {
      ...Hash,
      description: 'The leaf: SHA-256(salt ‖ RFC 8785 JSON of the anchored fields), hex',
    },
    salt: { ...Hash, description: "The leaf's 32 random bytes, hex" },
    proof: Type.Array(
      Type.Union([
        Type.Object({ left: Hash }, { additionalProperties: false }),
        Type.Object({ right: Hash }, { additionalProperties: false }),
      ]),
      {
        maxItems: 64,
        description:
          'Siblings from the leaf up: {left} is hashed before the running hash, {right} after (SHA-256 of the 64 bytes)',
      },
    ),
    merkleRoot: Hash,
    anchors: Type.Array(
      Type.Object(
        {
          type: Type.Union([Type.Literal('evm-input'), Type.Literal('algorand-note')], {
            description: "evm-input: the transaction's input data; algorand-note: the payment's note",
          }),
          network: Type.String({ minLength: 1, maxLength: 64 }),
          chain: Type.String({
            minLength: 1,
            maxLength: 128,
            description: 'eip155:<chain id> on EVM, the genesis hash (base64) on Algorand',
          }),
          sourceId: Type.String({ minLength: 1, maxLength: 128, description: 'The transaction id' }),
          blockNumber: Type.Integer({ minimum: 0 }),
          payload: Type.String({
            pattern: '^[0-9a-f]{72}$',
            description: 'The bytes the transaction carries, hex: "LHK1" (4c484b31) then the Merkle root',
          }),
        },
        { additionalProperties: false },
      ),
      { minItems: 1, maxItems: 1 },
    ),
  },
  { additionalProperties: false, description: 'A self-contained anchoring receipt (Chainpoint v2 shape)' },
);

/** The receipt, or where it goes wrong (JSON pointers). */
export function parseReceipt(
  value: unknown,
): { receipt: Receipt } | { errors: { pointer: string; detail: string }[] } {
  if (Value.Check(ReceiptSchema, value)) return { receipt: value as Receipt };
  const errors = [...Value.Errors(ReceiptSchema, value)].slice(0, 10).map((e) => ({
    pointer: `#${(e as { instancePath?: string }).instancePath ?? ''}`,
    detail: (e as { message?: string }).message ?? 'is not valid',
  }));
  return { errors: errors.length > 0 ? errors : [{ pointer: '#', detail: 'is not a receipt' }] };
}
