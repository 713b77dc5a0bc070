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

  it('the last path resolved is reused only for the same frozen path and the same user ($user names each its own)', () => {
    const path = parsePathText('"$user", public')!;
    const alice = pathResolution([path], 'alice');
    expect(alice).toMatchObject({ schemas: ['alice', 'public'] });
    expect(pathResolution([path], 'alice')).toBe(alice);
    expect(pathResolution([path], 'bob')).toMatchObject({ schemas: ['bob', 'public'] });
    expect(pathResolution([path], null)).toMatchObject({ schemas: ['$user', 'public'] });
    expect(pathResolution([path], 'alice')).toMatchObject({ schemas: ['alice', 'public'] });
    const copy = ['$user', 'public'];
    expect(pathResolution([copy], 'alice')).toMatchObject({ schemas: ['alice', 'public'] });
    copy[1] = 'secret';
    expect(pathResolution([copy], 'alice')).toMatchObject({ schemas: ['alice', 'secret'] });
    expect(pathResolution([path, GOVERNED_PATH], 'alice')).toMatchObject({ schemas: ['alice', 'public'], precise: false });
  });
});
