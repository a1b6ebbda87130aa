import { LedgerhookError } from '../errors.js';

/** Refused start: a misconfiguration the operator must fix, reported as one line. */
export class StartupError extends LedgerhookError {}
