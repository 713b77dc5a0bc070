// Agent key primitives: SCRAM-SHA-256 verifier against the RFC 7677 example, digests, the custom-key policy and bearer parsing.
import { createHash, createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { customKeyProblem, digestApiKey, estimateEntropyBits, generateApiKey, legacyDigest, parseScramVerifier, scramVerifier } from '../../src/identity/keys.js';
import { bearerKey } from '../../src/identity/authenticate.js';

const POLICY = { min_length: 32, min_entropy_bits: 128 };

describe('SCRAM-SHA-256 verifier', () => {
  it('verifies the RFC 7677 §3 exchange (password "pencil")', async () => {
    const salt = Buffer.from('W22ZaJ0SNY7soEsUEjb6gQ==', 'base64');
    const text = await scramVerifier('pencil', salt, 4096);
    expect(text.startsWith('SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$')).toBe(true);
    const v = parseScramVerifier(text)!;
    const authMessage = [
      'n=user,r=rOprNGfwEbeRWgbNEkqO',
      'r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096',
      'c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0',
    ].join(',');
    const proof = Buffer.from('dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=', 'base64');
    const clientSignature = createHmac('sha256', v.storedKey).update(authMessage).digest();
    const clientKey = Buffer.from(proof.map((b, i) => b ^ clientSignature[i]!));
    expect(createHash('sha256').update(clientKey).digest().equals(v.storedKey)).toBe(true);
    expect(createHmac('sha256', v.serverKey).update(authMessage).digest('base64')).toBe('6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=');
  });

  it('uses a fresh salt per verifier and rejects malformed text', async () => {
    expect(await scramVerifier('k')).not.toBe(await scramVerifier('k'));
    expect(parseScramVerifier('SCRAM-SHA-256$4096:abc$short:short')).toBeNull();
    expect(parseScramVerifier('md5abcdef')).toBeNull();
  });
});

describe('digests and generated keys', () => {
  it('HMAC with the pepper differs from the legacy digest and from another pepper', () => {
    const key = generateApiKey();
    expect(key).toMatch(/^gh_[A-Za-z0-9_-]{43}$/);
    expect(digestApiKey('pepper-one', key)).toMatch(/^[0-9a-f]{64}$/);
    expect(digestApiKey('pepper-one', key)).not.toBe(digestApiKey('pepper-two', key));
    expect(legacyDigest(key)).toBe(createHash('sha256').update(key).digest('hex'));
    expect(customKeyProblem(key, POLICY)).toBeNull();
  });
});

describe('custom-key policy', () => {
  it('accepts random keys and refuses short, repeated, sequential or low-variety ones', () => {
    expect(customKeyProblem('Zq8#vN2!pLm4@Rt6$Wx9%Yb3^Kc7&Hd5*Jf1', POLICY)).toBeNull();
    for (const weak of ['short', 'a'.repeat(64), 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJ', 'xyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyzxyz', '0101010101010101010101010101010101', 'ab'.repeat(10) + 'cd'.repeat(10), 'has a space in it, which is not allowed here']) {
      expect(customKeyProblem(weak, POLICY), weak).not.toBeNull();
    }
    expect(estimateEntropyBits('aaaaaaaa')).toBeLessThan(8);
    expect(estimateEntropyBits('0123456789')).toBeLessThan(8);
  });

  it('refuses human-made keys that merely use many different characters', () => {
    // Each was accepted by an estimate that took the distinct count as evidence of a large random alphabet (reverted).
    for (const weak of ['ThisIsMyVerySecretKeyDontShare!!', 'postgres://user:password@db:5432/app', 'abAB12!@cdCD34#$efEF56%^ghGH78&*ij']) {
      expect(customKeyProblem(weak, POLICY), weak).not.toBeNull();
    }
  });

  it('never puts the key in the problem text', () => {
    const key = 'my-secret-but-weak-key';
    expect(customKeyProblem(key, POLICY)).not.toContain(key);
  });
});

describe('bearer parsing', () => {
  it('is bounded and strict', () => {
    expect(bearerKey('Bearer abc')).toBe('abc');
    expect(bearerKey('bearer abc')).toBe('abc');
    for (const h of [undefined, '', 'Bearer', 'Bearer ', 'Basic abc', 'Bearer a b', `Bearer ${'x'.repeat(1025)}`, 'Bearer \u00e9t\u00e9']) expect(bearerKey(h), String(h)).toBeNull();
  });
});
