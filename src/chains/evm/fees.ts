// The fee a transaction's sender paid, worked out from its receipt as the node answered it
// (eth_getTransactionReceipt / eth_getBlockReceipts, hex quantities, not formatted by viem).
//
// What each part is and where it comes from:
//
// - Execution: gasUsed × effectiveGasPrice (EIP-1559; the receipt field every client since London
//   reports). A node from before London answers without effectiveGasPrice; then the transaction's
//   own gasPrice is what was paid per gas, and the caller passes it.
// - Blobs (EIP-4844, type 0x3): blobGasUsed × blobGasPrice, burned on top of execution. Both fields are
//   on the receipt of a blob transaction (go-ethereum internal/ethapi marshalReceipt writes them only
//   for BlobTxType; anvil writes blobGasPrice on every receipt, blobGasUsed only on blob ones).
// - OP Stack L1 data fee: the receipt's l1Fee, charged on top of execution to every non-deposit
//   transaction (op-geth core/types/receipt_opstack.go deriveOPStackFields; formula in
//   core/types/rollup_cost.go, Bedrock/Ecotone/Fjord). It is already a total in wei.
// - OP Stack operator fee (Isthmus and later): op-geth puts operatorFeeScalar and operatorFeeConstant
//   on the receipt only when at least one is non-zero (receipt_opstack.go, same function). The formula
//   changed with Jovian:
//     Isthmus: operatorFee = gasUsed × operatorFeeScalar / 1e6 + operatorFeeConstant
//       (ethereum-optimism/specs, protocol/isthmus/exec-engine.md "Operator Fee"; op-geth
//       rollup_cost.go newOperatorCostFuncIsthmus; integer division, rounding down)
//     Jovian:  operatorFee = gasUsed × operatorFeeScalar × 100 + operatorFeeConstant
//       (ethereum-optimism/design-docs protocol/operator-fee-scalar-fix.md; op-geth rollup_cost.go
//       newOperatorCostFuncOperatorFeeFix; both formulas are asserted against the operator fee vault's
//       balance in ethereum-optimism/optimism op-e2e/actions/proofs/operator_fee_test.go).
//   A receipt shows which one applies: from Jovian on, op-geth adds daFootprintGasScalar to every
//   non-deposit receipt ("DAFootprintGasScalar is nil prior to the Jovian hardfork").
// - OP Stack, Jovian: blobGasUsed on an OP receipt is the transaction's DA footprint
//   (daFootprintGasScalar × estimated DA size, receipt_opstack.go), a block-limit measure, not an
//   EIP-4844 blob fee: there is no blobGasPrice beside it and nothing is charged for it. Blob gas is
//   therefore only charged when the receipt carries a blobGasPrice.
// - OP Stack deposits (type 0x7e) buy their L2 gas on L1: they pay no L2 execution fee, no l1Fee and
//   no operator fee (op-geth DepositTx.effectiveGasPrice is 0; deriveOPStackFields skips deposits; the
//   operator fee test above asserts a deposit leaves the sender's L2 balance unchanged). Zero, whatever
//   the receipt says: nodes have reported a non-zero effectiveGasPrice for deposits (OP Goerli,
//   ethereum-optimism/optimism issue #5287: "effectiveGasPrice": "0x32"), and some clients put L1
//   fields on deposit receipts too.
// - Arbitrum (Nitro): the L1 part is bought as extra L2 gas, included in gasUsed ("gasUsedForL1:
//   amount of gas spent on l1 computation in units of l2 gas", docs.arbitrum.io Arbitrum SDK
//   ArbTransactionReceipt), so gasUsed × effectiveGasPrice is the whole fee and gasUsedForL1 is not
//   added again.
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
  if (type === DEPOSIT_TX_TYPE) return 0n;

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
  // Some nodes (anvil) put the block's blobGasPrice on every receipt; without blobGasUsed the
  // transaction carried no blob and paid nothing for blobs.
  if (blobGasPrice !== undefined && blobGasUsed !== undefined) fee += blobGasUsed * blobGasPrice;

  fee += optionalQuantity(receipt.l1Fee, 'l1Fee') ?? 0n;

  const scalar = optionalQuantity(receipt.operatorFeeScalar, 'operatorFeeScalar');
  const constant = optionalQuantity(receipt.operatorFeeConstant, 'operatorFeeConstant');
  if (scalar !== undefined || constant !== undefined) {
    const jovian = optionalQuantity(receipt.daFootprintGasScalar, 'daFootprintGasScalar') !== undefined;
    const scaled = jovian ? gasUsed * (scalar ?? 0n) * 100n : (gasUsed * (scalar ?? 0n)) / 1_000_000n;
    fee += scaled + (constant ?? 0n);
  }
  return fee;
}
