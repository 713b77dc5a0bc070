// The console's one list component: a responsive table (each cell labelled for the phone-width card layout) or, when there are no rows, the empty-state notice.

/**
 * One column. `text` is shown escaped (names, SQL, anything a user typed); `cell` is markup built from other
 * components (links, badges, buttons) that escape their own text. `show: false` leaves the column out, e.g. an
 * actions column for an admin whose roles grant no action.
 */
export type Column<T> = { label: string; show?: boolean } & ({ text: (row: T) => string | number; cell?: never } | { cell: (row: T) => JSX.Element; text?: never });

export interface DataTableProps<T> {
  rows: readonly T[];
  columns: ReadonlyArray<Column<T>>;
  /** The notice shown instead of an empty table (plain text, escaped). */
  empty: string;
  /** An accessible name for the table, for pages with several tables. */
  caption?: string;
}

function Cell<T>({ column, row }: { column: Column<T>; row: T }): JSX.Element {
  if (column.text) {
    return (
      <td data-label={column.label} safe>
        {String(column.text(row))}
      </td>
    );
  }
  return <td data-label={column.label}>{column.cell!(row)}</td>;
}

export function DataTable<T>({ rows, columns, empty, caption }: DataTableProps<T>): JSX.Element {
  if (rows.length === 0) {
    return (
      <p class="notice" safe>
        {empty}
      </p>
    );
  }
  const shown = columns.filter((c) => c.show !== false);
  return (
    <div class="table-wrap">
      <table class="responsive">
        {caption ? (
          <caption class="visually-hidden" safe>
            {caption}
          </caption>
        ) : (
          ''
        )}
        <thead>
          <tr>
            {shown.map((c) => (
              <th scope="col" safe>
                {c.label}
              </th>
            ))}
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr>
              {shown.map((c) => (
                <Cell column={c} row={row} />
              ))}
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}
