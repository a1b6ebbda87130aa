import { Ajv, type ErrorObject, type Options, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import type { FastifySchema, FastifySchemaCompiler } from 'fastify';
import type { FieldError } from '../errors.js';

// ajv-formats ships CommonJS with a default export.
const addFormats = addFormatsModule as unknown as (ajv: Ajv) => Ajv;

function buildAjv(options: Options): Ajv {
  const ajv = new Ajv({
    // Unknown fields are refused (400), never silently dropped.
    removeAdditional: false,
    useDefaults: true,
    allErrors: true,
    strict: false,
    ...options,
  });
  addFormats(ajv);
  return ajv;
}

/**
 * Errors for query, path and header values that no column can hold: a NUL (PostgreSQL refuses
 * it; `%00` decodes to one) or an unpaired surrogate. Bodies get the same check from the JSON
 * parser (json-body.ts).
 */
function unstorableText(data: unknown): ErrorObject[] {
  if (data === null || typeof data !== 'object') return NO_ERRORS;
  let errors: ErrorObject[] | undefined;
  // Plain loops: this runs on every request's parameters, mostly clean ones.
  for (const name of Object.keys(data)) {
    const value = (data as Record<string, unknown>)[name];
    const message = Array.isArray(value)
      ? value.some((v) => textProblem(v) === NUL)
        ? NUL
        : value.some((v) => textProblem(v) === SURROGATE)
          ? SURROGATE
          : undefined
      : textProblem(value);
    if (message) {
      errors ??= [];
      errors.push({
        instancePath: `/${escapePointerToken(name)}`,
        schemaPath: '#',
        keyword: 'text',
        params: {},
        message,
      });
    }
  }
  return errors ?? NO_ERRORS;
}

const NO_ERRORS: ErrorObject[] = [];
const NUL = 'must not contain a NUL character (%00)';
const SURROGATE = 'must not contain an unpaired UTF-16 surrogate';

function textProblem(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  if (value.includes('\u0000')) return NUL;
  return value.isWellFormed() ? undefined : SURROGATE;
}

/** Runs `validate` only on text that can be stored; reports the same way ajv does. */
function guardText(validate: ValidateFunction): ValidateFunction {
  const guarded = ((data: unknown) => {
    const errors = unstorableText(data);
    if (errors.length > 0) {
      guarded.errors = errors;
      return false;
    }
    const valid = validate(data);
    guarded.errors = validate.errors;
    return valid;
  }) as ValidateFunction;
  return guarded;
}

/**
 * Bodies are validated as sent (a string "5" is not a number); query strings, path parameters
 * and headers are text on the wire, so they are coerced to the declared types.
 */
export function createValidatorCompiler(): FastifySchemaCompiler<FastifySchema> {
  return ({ schema, httpPart }) => {
    const body = httpPart === 'body';
    const key = `${body ? 'b' : 'p'}${JSON.stringify(schema)}`;
    let validate = compiledValidators.get(key);
    if (!validate) {
      validate = body ? strict.compile(schema as object) : guardText(coercing.compile(schema as object));
      compiledValidators.set(key, validate);
    }
    return validate;
  };
}

/**
 * Validators compiled once per process, by the schema's content: routes build their schemas when
 * they register, so a process that starts the API more than once (the test suite starts ~140)
 * compiled the same schemas every time, 40 s of the suite's CPU with the serializers
 * (serialization.ts; bench/README.md, "The test suite's CPU"). A compiled validator keeps no state
 * between calls but `errors`, which fastify reads at once.
 */
const compiledValidators = new Map<string, ValidateFunction>();
const strict = buildAjv({ coerceTypes: false });
const coercing = buildAjv({ coerceTypes: 'array' });

export function escapePointerToken(token: string): string {
  return token.replace(/~/g, '~0').replace(/\//g, '~1');
}

function describe(error: ErrorObject): string {
  switch (error.keyword) {
    case 'required':
      return 'is required';
    case 'additionalProperties':
      return 'is not a known field';
    case 'enum':
      return `must be one of ${(error.params as { allowedValues: unknown[] }).allowedValues.join(', ')}`;
    default:
      return error.message ?? 'is invalid';
  }
}

function location(error: ErrorObject): string {
  const params = error.params as { missingProperty?: string; additionalProperty?: string };
  const child =
    params.missingProperty ??
    (error.keyword === 'additionalProperties' ? params.additionalProperty : undefined);
  return child === undefined ? error.instancePath : `${error.instancePath}/${escapePointerToken(child)}`;
}

/** Turns ajv errors into field errors: JSON pointers for bodies, names for parameters and headers. */
export function toFieldErrors(errors: ErrorObject[], context: string): FieldError[] {
  const seen = new Set<string>();
  const out: FieldError[] = [];
  for (const error of errors) {
    const path = location(error);
    const detail = describe(error);
    const key = `${path}\0${detail}`;
    if (seen.has(key)) continue;
    seen.add(key);
    const name = path.split('/')[1] ?? '';
    if (context === 'body') out.push({ pointer: `#${path}`, detail });
    else if (context === 'headers') out.push({ header: name, detail });
    else out.push({ parameter: name, detail });
  }
  return out;
}

/** How a field error names its field, for the one-line `detail`. */
export function fieldName(error: FieldError): string {
  if (error.pointer !== undefined)
    return error.pointer === '#' ? 'body' : error.pointer.slice(2).replace(/\//g, '.');
  return error.parameter ?? error.header ?? 'request';
}
