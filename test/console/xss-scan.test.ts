// Console templates escape what they render: every JSX child expression under src/ is an element, a number, a `safe` child or escaped text (the scan stands in for @kitajs/ts-html-plugin).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { scanForUnescapedChildren } from './support/xss-scan.js';

function tsxFiles(dir: string): string[] {
  const out: string[] = [];
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const full = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...tsxFiles(full));
    else if (entry.name.endsWith('.tsx')) out.push(full);
  }
  return out;
}

describe('unescaped-children scan', () => {
  it('reports exactly the unescaped children of the fixture', () => {
    const fixture = path.resolve('test/console/fixtures/unescaped.tsx');
    const flaggedLines = readFileSync(fixture, 'utf8')
      .split('\n')
      .flatMap((line, i) => (line.endsWith('// FLAG') ? [i + 1] : []));
    const found = scanForUnescapedChildren([fixture]).map((f) => f.line);
    expect(flaggedLines.length).toBe(6);
    expect(found.sort((a, b) => a - b)).toEqual(flaggedLines);
  });

  it('finds nothing unescaped in the console templates', () => {
    const files = tsxFiles(path.resolve('src'));
    expect(files.length).toBeGreaterThan(5);
    const findings = scanForUnescapedChildren(files);
    expect(findings.map((f) => `${f.file}:${f.line} ${f.text}`)).toEqual([]);
    // Parsing every template with the TypeScript compiler is CPU-bound: a guard against a hang, not a target.
  }, 120_000);
});
