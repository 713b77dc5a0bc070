// Base URLs a second parser would read differently are refused with the reason; ordinary ones pass unchanged.
import { describe, expect, it } from 'vitest';
import { baseUrlProblem } from '../../src/governance/base-url.js';
import { ACCEPTED_BASE_URLS, REFUSED_BASE_URLS } from './base-url-table.js';

describe('base URL rules', () => {
  it.each(REFUSED_BASE_URLS.map(([u, why]) => [JSON.stringify(u), u, why] as const))('refuses %s', (_n, url, why) => {
    const problem = baseUrlProblem(url);
    expect(problem, url).not.toBeNull();
    expect(problem!.toLowerCase()).toContain(why.toLowerCase());
  });

  it.each(ACCEPTED_BASE_URLS.map((u) => [u] as const))('accepts %s', (url) => {
    expect(baseUrlProblem(url)).toBeNull();
  });
});
