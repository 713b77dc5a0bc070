// pathText keeps the text of a frozen search_path with it (the wire listener asks for it on every statement) and writes any other path out each time, so a path changed after it was first written never keys a decision with its old text.
import { describe, expect, it } from 'vitest';
import { GOVERNED_PATH, parsePathText, pathResolution, pathText } from '../../../src/governance/sql/search-path.js';

describe('pathText', () => {
  it('quotes each name and doubles its quotes; the same frozen path gives the same text object each time', () => {
    const path = parsePathText('app, "we""ird", PUBLIC')!;
    expect(Object.isFrozen(path)).toBe(true);
    expect(pathText(path)).toBe('"app", "we""ird", "public"');
    expect(pathText(path)).toBe(pathText(path));
    expect(pathText(GOVERNED_PATH)).toBe('"public"');
  });

  it('a path that is not frozen is written out afresh: a change to it shows at once, in the text and in the resolution', () => {
    const path: string[] = ['public'];
    expect(pathText(path)).toBe('"public"');
    expect(pathResolution([path], 'agent')).toBeNull();
    path[0] = 'secret';
    expect(pathText(path)).toBe('"secret"');
    expect(pathResolution([path], 'agent')).toMatchObject({ schemas: ['secret'] });
  });
});
