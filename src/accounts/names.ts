import { ValidationError } from '../errors.js';

const ACCOUNT_NAME_PATTERN = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
/** The rule, as error messages and help state it. */
export const ACCOUNT_NAME_RULE =
  'must be 1-64 letters, digits, ".", "_" or "-", starting with a letter or digit';

export function validateAccountName(name: string): void {
  if (!ACCOUNT_NAME_PATTERN.test(name)) {
    throw new ValidationError('Invalid account name', [{ parameter: 'account', detail: ACCOUNT_NAME_RULE }]);
  }
}
