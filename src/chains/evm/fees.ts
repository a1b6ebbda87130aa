// The fee a transaction's sender paid, worked out from its receipt as the node answered it
// (eth_getTransactionReceipt / eth_getBlockReceipts, hex quantities, not formatted by viem). What
// each part is, for users: docs/internal-transfers.md ("Fees and failures"). The clients' code each
// rule rests on is cited where it is applied. Arbitrum (Nitro) buys the L1 part as extra L2 gas,
// included in gasUsed ("gasUsedForL1: amount of gas spent on l1 computation in units of l2 gas",
// docs.arbitrum.io Arbitrum SDK ArbTransactionReceipt): nothing is added for it.
import type { Hex } from 'viem';

/** The fee fields of a receipt as JSON-RPC answers it (hex quantities), raw, not formatted by viem. */
export interface RpcReceiptFees {
  gasUsed: Hex;
  effectiveGasPrice?: Hex | null;
  blobGasUsed?: Hex | null;
  blobGasPrice?: Hex | null;
  // OP-stack (Bedrock/Ecotone/Fjord/Isthmus) receipts:
  l1Fee?: Hex | null;
  operatorFeeScalar?: Hex | null;
  operatorFeeConstant?: Hex | null;
  [key: string]: unknown;
}

/** EIP-2718 type of OP Stack deposit transactions. */
const DEPOSIT_TX_TYPE = 0x7en;
/** EIP-2718 type of EIP-4844 blob transactions. */
const BLOB_TX_TYPE = 0x3n;

const QUANTITY = /^0x[0-9a-fA-F]+$/;

/** A hex quantity as a bigint; a clear Error naming the field for anything else. */
function quantity(value: unknown, field: string): bigint {
  if (typeof value !== 'string' || !QUANTITY.test(value)) {
    const shown = typeof value === 'string' ? JSON.stringify(value) : String(value);
    throw new Error(`receipt field ${field} is not a hex quantity: ${shown.slice(0, 80)}`);
  }
  return BigInt(value);
}

/** An optional hex quantity: undefined when absent or null, an Error when present but malformed. */
function optionalQuantity(value: unknown, field: string): bigint | undefined {
  return value === undefined || value === null ? undefined : quantity(value, field);
}

/**
 * What the sender paid, in wei: gasUsed × effectiveGasPrice (falling back to the transaction's
 * gasPrice when a legacy node's receipt lacks effectiveGasPrice), plus blobGasUsed × blobGasPrice
 * (EIP-4844), plus OP-stack's l1Fee and operator fee where the receipt has them. On Arbitrum gasUsed
 * already covers L1 (nothing added).
 *
 * OP Stack deposit transactions (type 0x7e) pay nothing on L2 and give 0. Throws an Error naming the
 * field when a fee field is not a hex quantity, or when no gas price is known at all.
 */
export function transactionFee(receipt: RpcReceiptFees, txGasPrice?: Hex | null): bigint {
  const gasUsed = quantity(receipt.gasUsed, 'gasUsed');
  const type = optionalQuantity(receipt.type, 'type');
  // OP Stack deposits (type 0x7e) buy their L2 gas on L1: no execution fee, l1Fee or operator fee
  // (op-geth DepositTx.effectiveGasPrice is 0; deriveOPStackFields skips deposits; operator_fee_test.go
  // asserts a deposit leaves the sender's L2 balance unchanged). Zero whatever the receipt says: nodes
  // have reported a non-zero effectiveGasPrice for deposits (OP Goerli, ethereum-optimism/optimism
  // issue #5287: "effectiveGasPrice": "0x32"), and some clients put L1 fields on deposit receipts.
  if (type === DEPOSIT_TX_TYPE) return 0n;

  // Execution: gasUsed × effectiveGasPrice (EIP-1559, on every client's receipt since London); a
  // node from before London has none, and the transaction's own gasPrice is what was paid per gas.
  const gasPrice =
    optionalQuantity(receipt.effectiveGasPrice, 'effectiveGasPrice') ??
    optionalQuantity(txGasPrice, 'gasPrice (of the transaction)');
  if (gasPrice === undefined) {
    throw new Error('receipt has no effectiveGasPrice and no transaction gasPrice was given');
  }
  let fee = gasUsed * gasPrice;

  const blobGasUsed = optionalQuantity(receipt.blobGasUsed, 'blobGasUsed');
  const blobGasPrice = optionalQuantity(receipt.blobGasPrice, 'blobGasPrice');
  if (type === BLOB_TX_TYPE && (blobGasPrice === undefined || blobGasUsed === undefined)) {
    throw new Error('blob transaction receipt (type 0x3) has no blobGasUsed or no blobGasPrice');
  }
  // Blobs (EIP-4844, type 0x3), burned on top of execution: go-ethereum (internal/ethapi
  // marshalReceipt) writes blobGasUsed and blobGasPrice on blob transactions' receipts only; anvil
  // writes blobGasPrice on every receipt, and without blobGasUsed no blob was carried. On OP Stack
  // from Jovian, blobGasUsed is the DA footprint (daFootprintGasScalar × estimated DA size,
  // receipt_opstack.go), a block-limit measure with no blobGasPrice beside it, charged nothing: blob
  // gas is paid only where the receipt has a blobGasPrice.
  if (blobGasPrice !== undefined && blobGasUsed !== undefined) fee += blobGasUsed * blobGasPrice;

  // OP Stack L1 data fee, charged on top to every non-deposit transaction, already a total in wei
  // (op-geth core/types/receipt_opstack.go deriveOPStackFields; rollup_cost.go, Bedrock to Fjord).
  fee += optionalQuantity(receipt.l1Fee, 'l1Fee') ?? 0n;

  // OP Stack operator fee (Isthmus on), on the receipt only when scalar or constant is non-zero.
  // Isthmus: gasUsed × scalar / 1e6 + constant, rounded down (ethereum-optimism/specs
  // protocol/isthmus/exec-engine.md "Operator Fee"; op-geth rollup_cost.go newOperatorCostFuncIsthmus).
  // Jovian: gasUsed × scalar × 100 + constant (ethereum-optimism/design-docs
  // protocol/operator-fee-scalar-fix.md; newOperatorCostFuncOperatorFeeFix). Both are asserted against
  // the fee vault in optimism's op-e2e/actions/proofs/operator_fee_test.go. Jovian's receipts carry
  // daFootprintGasScalar ("DAFootprintGasScalar is nil prior to the Jovian hardfork"): that says which.
  const scalar = optionalQuantity(receipt.operatorFeeScalar, 'operatorFeeScalar');
  const constant = optionalQuantity(receipt.operatorFeeConstant, 'operatorFeeConstant');
  if (scalar !== undefined || constant !== undefined) {
    const jovian = optionalQuantity(receipt.daFootprintGasScalar, 'daFootprintGasScalar') !== undefined;
    const scaled = jovian ? gasUsed * (scalar ?? 0n) * 100n : (gasUsed * (scalar ?? 0n)) / 1_000_000n;
    fee += scaled + (constant ?? 0n);
  }
  return fee;
}
