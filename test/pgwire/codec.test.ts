// The wire codec's reading side: frames are the messages sent whatever the stream's cuts, messages join for one write, and a Bind reads back as it was written (generated messages).
import { describe, expect, it } from 'vitest';
import fc from 'fast-check';
import { BodyReader, COPY_DATA_PART, FrameReader, Frontend, ProtocolViolation, joinMessages, parseBind, type Frame } from '../../src/gateway/pgwire/protocol.js';

/** One message: its type byte, its length (body + 4) and its body. */
function message(type: number, body: Uint8Array): Buffer {
  const m = Buffer.alloc(5 + body.length);
  m[0] = type;
  m.writeInt32BE(body.length + 4, 1);
  m.set(body, 5);
  return m;
}

/** The stream cut at the given offsets (sorted, deduplicated, inside the stream). */
function cut(stream: Buffer, at: number[]): Buffer[] {
  const points = [...new Set(at.map((a) => a % (stream.length + 1)))].sort((a, b) => a - b);
  const chunks: Buffer[] = [];
  let from = 0;
  for (const p of [...points, stream.length]) {
    if (p > from) chunks.push(stream.subarray(from, p));
    from = Math.max(from, p);
  }
  return chunks;
}

function readAll(reader: FrameReader, chunks: Buffer[]): Frame[] {
  const frames: Frame[] = [];
  for (const c of chunks) {
    reader.push(c);
    for (let f = reader.next(); f !== null; f = reader.next()) frames.push({ type: f.type, raw: Buffer.from(f.raw), body: Buffer.from(f.body) });
  }
  return frames;
}

const TYPES = [Frontend.Bind, Frontend.Execute, Frontend.Sync, Frontend.Query, Frontend.Parse, Frontend.Describe];
const messages = fc.array(fc.tuple(fc.constantFrom(...TYPES), fc.uint8Array({ maxLength: 40 })), { maxLength: 12 });

describe('FrameReader', () => {
  it('returns the messages sent, whole and in order, however the stream is cut', () => {
    fc.assert(
      fc.property(messages, fc.array(fc.nat(), { maxLength: 20 }), (sent, at) => {
        const stream = Buffer.concat(sent.map(([t, b]) => message(t, b)));
        const reader = new FrameReader({ startupBytes: 0, messageBytes: 1024 });
        reader.startup = false;
        const frames = readAll(reader, cut(stream, at));
        expect(frames.map((f) => [f.type, [...f.body]])).toEqual(sent.map(([t, b]) => [t, [...b]]));
        expect(Buffer.concat(frames.map((f) => f.raw)).equals(stream)).toBe(true);
        expect(reader.buffered).toBe(0);
      }),
      { numRuns: 1_000 },
    );
  });

  it('reads the startup packet, then the messages, from one chunk or many', () => {
    fc.assert(
      fc.property(messages, fc.array(fc.nat(), { maxLength: 10 }), (sent, at) => {
        const params = Buffer.from('user\0agent\0database\0src\0\0');
        const startup = Buffer.alloc(8 + params.length);
        startup.writeInt32BE(startup.length, 0);
        startup.writeInt32BE(196608, 4);
        params.copy(startup, 8);
        const rest = sent.map(([t, b]) => message(t, b));
        const reader = new FrameReader({ startupBytes: 1024, messageBytes: 1024 });
        const chunks = cut(Buffer.concat([startup, ...rest]), at);
        const frames: Frame[] = [];
        for (const c of chunks) {
          reader.push(c);
          for (let f = reader.next(); f !== null; f = reader.next()) {
            frames.push({ type: f.type, raw: Buffer.from(f.raw), body: Buffer.from(f.body) });
            reader.startup = false;
          }
        }
        expect(frames[0]!.raw.equals(startup)).toBe(true);
        expect(frames.slice(1).map((f) => f.raw.toString('hex'))).toEqual(rest.map((r) => r.toString('hex')));
      }),
      { numRuns: 500 },
    );
  });

  it('streams a CopyData above the message bound in parts that add up to its body, then reads on', () => {
    fc.assert(
      fc.property(fc.integer({ min: 65, max: 400 }), fc.array(fc.nat(), { maxLength: 20 }), (size, at) => {
        const body = Buffer.alloc(size, 7);
        const after = message(Frontend.Sync, new Uint8Array());
        const reader = new FrameReader({ startupBytes: 0, messageBytes: 64, streamCopyData: true });
        reader.startup = false;
        const frames = readAll(reader, cut(Buffer.concat([message(Frontend.CopyData, body), after]), at));
        expect(frames[0]).toMatchObject({ type: Frontend.CopyData });
        expect(frames[0]!.body.length).toBe(0);
        const parts = frames.filter((f) => f.type === COPY_DATA_PART);
        expect(Buffer.concat(parts.map((p) => p.body)).equals(body)).toBe(true);
        expect(frames.at(-1)!.raw.equals(after)).toBe(true);
      }),
      { numRuns: 300 },
    );
  });

  it('refuses a length past the bound before its body arrives', () => {
    const reader = new FrameReader({ startupBytes: 0, messageBytes: 64 });
    reader.startup = false;
    reader.push(Buffer.concat([message(Frontend.Sync, new Uint8Array()), Buffer.from([Frontend.Query, 0, 0, 1, 0])]));
    expect(reader.next()?.type).toBe(Frontend.Sync);
    expect(() => reader.next()).toThrow(ProtocolViolation);
  });
});

describe('joinMessages', () => {
  it('is the messages in order: a view of their memory when they follow one another in it, a copy otherwise', () => {
    fc.assert(
      fc.property(fc.array(fc.uint8Array({ minLength: 1, maxLength: 30 }), { minLength: 1, maxLength: 8 }), fc.array(fc.boolean(), { maxLength: 8 }), (bodies, apart) => {
        // One chunk as a socket read gives it; a message marked apart is a buffer of its own (the relay's own messages).
        const chunk = Buffer.alloc(bodies.reduce((n, b) => n + b.length, 0)); // never from the pool, like a socket read's
        bodies.reduce((o, b) => (chunk.set(b, o), o + b.length), 0);
        let at = 0;
        const parts = bodies.map((b, i) => {
          const view = chunk.subarray(at, at + b.length);
          at += b.length;
          return apart[i] ? Buffer.from(view) : view;
        });
        const joined = joinMessages(parts, chunk.length);
        expect(joined.equals(chunk)).toBe(true);
        const shared = parts.every((p) => p.buffer === chunk.buffer);
        expect(joined.buffer === chunk.buffer).toBe(shared);
      }),
      { numRuns: 1_000 },
    );
  });
});

/** A Bind body as a driver writes it. */
function bindBody(portal: string, statement: string, formats: number[], params: (Buffer | null)[], results: number[]): Buffer {
  const parts: Buffer[] = [Buffer.from(`${portal}\0${statement}\0`)];
  const int16 = (v: number) => Buffer.from([(v >> 8) & 0xff, v & 0xff]);
  const int32 = (v: number) => { const b = Buffer.alloc(4); b.writeInt32BE(v); return b; };
  parts.push(int16(formats.length), ...formats.map(int16), int16(params.length));
  for (const p of params) parts.push(p === null ? int32(-1) : Buffer.concat([int32(p.length), p]));
  parts.push(int16(results.length), ...results.map(int16));
  return Buffer.concat(parts);
}

const name = fc.oneof(fc.constant(''), fc.string({ maxLength: 8 }), fc.string({ minLength: 60, maxLength: 200 }), fc.constant('préparé_語')).map((s) => s.replaceAll('\0', ''));

describe('parseBind', () => {
  it('reads back the names, parameters and formats a driver wrote', () => {
    fc.assert(
      fc.property(name, name, fc.array(fc.option(fc.tuple(fc.string({ maxLength: 100 }), fc.boolean()), { nil: null }), { maxLength: 6 }), fc.constantFrom(0, 1, 2), (portal, statement, values, formatMode) => {
        // Formats: none (all text), one for all, or one per parameter.
        const perParam = values.map((v) => (v !== null && v[1] ? 1 : 0));
        const formats = formatMode === 0 ? [] : formatMode === 1 ? [perParam[0] ?? 0] : perParam;
        const formatOf = (i: number) => (formats.length === 0 ? 0 : formats.length === 1 ? formats[0]! : formats[i]!);
        const params = values.map((v, i) => (v === null ? null : formatOf(i) === 1 ? Buffer.from(v[0], 'latin1') : Buffer.from(v[0], 'utf8')));
        const bind = parseBind(bindBody(portal, statement, formats, params, [0, 1]));
        expect(bind.portal).toBe(portal);
        expect(bind.statement).toBe(statement);
        expect(bind.resultFormats).toEqual([0, 1]);
        expect(bind.params).toEqual(params.map((p, i) => (p === null ? null : formatOf(i) === 1 ? { binary: p.toString('base64') } : p.toString('utf8'))));
      }),
      { numRuns: 1_000 },
    );
  });

  it('refuses a name without its NUL, short or long, and a parameter past the body', () => {
    for (const text of ['abc', 'x'.repeat(64), 'x'.repeat(65), 'y'.repeat(500)]) expect(() => new BodyReader(Buffer.from(text)).cstring()).toThrow(ProtocolViolation);
    expect(new BodyReader(Buffer.from(`${'z'.repeat(300)}\0`)).cstring()).toBe('z'.repeat(300));
    const body = bindBody('', 's', [], [Buffer.from('12345')], []);
    expect(() => parseBind(body.subarray(0, body.length - 4))).toThrow(ProtocolViolation);
  });
});
