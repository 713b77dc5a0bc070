// The console's list component: text cells escaped, markup cells kept, hidden columns left out, the empty notice escaped.
import { describe, expect, it } from 'vitest';
import { DataTable } from '../../src/admin/console/data-table.js';

const PAYLOAD = `<script>alert(1)</script>"'><img src=x onerror=alert(2)>`;

describe('DataTable', () => {
  it('escapes text cells, keeps markup cells and labels every cell for the phone layout', async () => {
    const html = await DataTable({
      rows: [{ name: PAYLOAD, id: 7 }],
      empty: 'none',
      columns: [
        { label: 'Name', text: (r) => r.name },
        { label: 'Link', cell: (r) => `<a href="/x/${r.id}">open</a>` },
        { label: 'Hidden', show: false, text: () => 'never shown' },
      ],
    });
    expect(html).not.toContain('<script>');
    expect(html).not.toContain('<img');
    expect(html).toContain('&lt;script>alert(1)&lt;/script>');
    expect(html).toContain('<td data-label="Link"><a href="/x/7">open</a></td>');
    expect(html).toContain('<th scope="col">Name</th>');
    expect(html).not.toContain('Hidden');
    expect(html).not.toContain('never shown');
  });

  it('shows the empty notice, escaped, instead of a table', async () => {
    const html = await DataTable({ rows: [], empty: `No ${PAYLOAD} yet.`, columns: [{ label: 'Name', text: (r: { n: string }) => r.n }] });
    expect(html).not.toContain('<table');
    expect(html).toMatch(/^<p class="notice">No &lt;script>/);
  });
});
