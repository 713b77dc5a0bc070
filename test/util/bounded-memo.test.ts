// BoundedMemo: answers kept under short keys, none past the bound, all forgotten when full.
import { describe, expect, it } from 'vitest';
import { BoundedMemo } from '../../src/util/bounded-memo.js';

describe('BoundedMemo', () => {
  it('keeps an answer under a short key, answers a long key without keeping it, and clears when full', () => {
    const memo = new BoundedMemo<number | null>(3, 5);
    expect(memo.keep('a', 1)).toBe(1);
    expect(memo.keep('b', null)).toBeNull();
    expect(memo.get('a')).toBe(1);
    expect(memo.get('b')).toBeNull();
    expect(memo.keep('toolong', 7)).toBe(7);
    expect(memo.get('toolong')).toBeUndefined();
    // A key of exactly the longest length is kept (then the memo is full).
    memo.keep('fives', 5);
    expect(memo.get('fives')).toBe(5);
    // Full at three: the fourth answer starts a new memo.
    memo.keep('d', 4);
    expect([memo.get('a'), memo.get('b'), memo.get('fives'), memo.get('d')]).toEqual([undefined, undefined, undefined, 4]);
  });
});
