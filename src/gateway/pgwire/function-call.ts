// The protocol's FunctionCall message (large-object APIs, psql's \lo_import): its codec, the catalog read that names the function it calls, and the SQL text it is governed as.
import { quoteIdent } from '../../connectors/postgres-exec.js';
import { BodyReader, message, ProtocolViolation } from './protocol.js';

/** FunctionCallResponse: the one answer of a successful call. @see https://www.postgresql.org/docs/current/protocol-message-formats.html */
export const FUNCTION_CALL_RESPONSE = 0x56; // 'V'

export interface FunctionCallMessage {
  /** The function's OID (unsigned on the wire). */
  oid: number;
  /** Arguments as a Bind's parameters are kept: text as strings, binary as `{ binary: <base64> }`, nulls as null. */
  args: unknown[];
  /** 0 text, 1 binary. */
  resultFormat: number;
}

export function parseFunctionCall(body: Buffer): FunctionCallMessage {
  const r = new BodyReader(body);
  const oid = r.int32() >>> 0;
  const nFormats = r.int16();
  const formats: number[] = [];
  for (let i = 0; i < nFormats; i++) formats.push(r.int16());
  const nArgs = r.int16();
  if (nFormats > 1 && nFormats !== nArgs) throw new ProtocolViolation('function call message has a format code count that matches no argument count');
  const args: unknown[] = [];
  for (let i = 0; i < nArgs; i++) {
    const len = r.int32();
    if (len === -1) {
      args.push(null);
      continue;
    }
    const value = r.bytes(len);
    const format = nFormats === 0 ? 0 : nFormats === 1 ? formats[0]! : formats[i]!;
    args.push(format === 1 ? { binary: value.toString('base64') } : value.toString('utf8'));
  }
  const resultFormat = r.int16();
  if (r.remaining !== 0) throw new ProtocolViolation('function call message has trailing bytes');
  return { oid, args, resultFormat };
}

/** The value of a FunctionCallResponse (null for SQL NULL). */
export function parseFunctionCallResponse(body: Buffer): Buffer | null {
  const r = new BodyReader(body);
  const len = r.int32();
  return len === -1 ? null : r.bytes(len);
}

export function functionCallResponse(value: Buffer | null): Buffer {
  const len = Buffer.allocUnsafe(4);
  len.writeInt32BE(value === null ? -1 : value.length, 0);
  return message(FUNCTION_CALL_RESPONSE, value === null ? len : Buffer.concat([len, value]));
}

/** The catalog read naming the function: schema, name and result type. The OID is an integer, so it is written inline. */
export function functionLookupSql(oid: number): string {
  return `SELECT n.nspname, p.proname, p.prorettype::int4 FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE p.oid = ${oid >>> 0}::pg_catalog.oid`;
}

export interface CalledFunction {
  schema: string;
  name: string;
  returnType: number;
}

/**
 * The statement a function call is governed as: a SELECT of the function, schema-qualified, with the call's
 * arguments as parameters. Every rule for SQL that calls the function applies, and an approved call runs as this SQL.
 */
export function governedSql(fn: CalledFunction, argCount: number): string {
  const params = Array.from({ length: argCount }, (_, i) => `$${i + 1}`).join(', ');
  return `SELECT ${quoteIdent(fn.schema)}.${quoteIdent(fn.name)}(${params})`;
}
