/**
 * Tables as cards on a phone, for every list and data table of the console in one way: each body cell
 * carries its column's header as `data-label`, and below 480 px the stylesheet (`table[data-cards]` in
 * styles.css) lays each row out as a card of "label: value" lines instead of a table that scrolls sideways.
 * The table roles are set explicitly, since a table drawn with `display: block` loses them in some browsers.
 *
 * {@link TableCards} keeps the labels of every `table.data` and `table.data-table` below its host current as
 * rows come and go; every page has one (`PageElement`), so lists, settings tabs and drawers are covered
 * without a line of their own.
 */
import { html, type ReactiveController, type ReactiveControllerHost, type TemplateResult } from "lit";

/** Tables drawn as cards on a phone. */
const CARD_TABLES = "table.data, table.data-table";

/** A header cell's text as a label (visually hidden text included: it names the column for everyone). */
function headerText(th: Element): string {
  return (th.textContent ?? "").replace(/[▲▼↕]/g, "").replace(/\s+/g, " ").trim();
}

/** The labels of a table's columns, a header spanning columns repeated for each. */
function columnLabels(table: HTMLTableElement): string[] {
  const row = table.tHead?.rows[0];
  if (!row) return [];
  const labels: string[] = [];
  for (const cell of Array.from(row.cells)) {
    for (let i = 0; i < cell.colSpan; i++) labels.push(headerText(cell));
  }
  return labels;
}

function setRole(el: Element, role: string): void {
  if (el.getAttribute("role") !== role) el.setAttribute("role", role);
}

/** Labels one table's body cells with their column's header and sets its roles. */
export function labelTable(table: HTMLTableElement): void {
  const labels = columnLabels(table);
  if (!table.hasAttribute("data-cards")) table.setAttribute("data-cards", "");
  setRole(table, "table");
  for (const section of [table.tHead, ...Array.from(table.tBodies)]) {
    if (!section) continue;
    setRole(section, "rowgroup");
    for (const row of Array.from(section.rows)) {
      setRole(row, "row");
      let column = 0;
      for (const cell of Array.from(row.cells)) {
        const header = cell.tagName === "TH";
        setRole(
          cell,
          section === table.tHead
            ? "columnheader"
            : header && cell.getAttribute("scope") === "row"
            ? "rowheader"
            : "cell",
        );
        if (section !== table.tHead) {
          // A cell across the whole row (an empty state, a detail row) is not one column's value, and a row's
          // checkbox names itself.
          const label = cell.colSpan > 1 || labels.length <= 1 || cell.classList.contains("select-cell")
            ? ""
            : labels[column] ?? "";
          if (cell.getAttribute("data-label") !== label) cell.setAttribute("data-label", label);
        }
        column += cell.colSpan;
      }
    }
  }
}

/** Labels every card table below `root`. */
export function labelTables(root: ParentNode): void {
  for (const table of Array.from(root.querySelectorAll<HTMLTableElement>(CARD_TABLES))) labelTable(table);
}

/** Keeps the tables below its host labelled while the host's content changes. */
export class TableCards implements ReactiveController {
  readonly #host: ReactiveControllerHost & HTMLElement;
  #observer: MutationObserver | undefined;
  #frame = 0;

  constructor(host: ReactiveControllerHost & HTMLElement) {
    this.#host = host;
    host.addController(this);
  }

  hostConnected(): void {
    this.#observer = new MutationObserver(() => this.#schedule());
    this.#observer.observe(this.#host, { childList: true, subtree: true });
    this.#schedule();
  }

  hostDisconnected(): void {
    this.#observer?.disconnect();
    cancelAnimationFrame(this.#frame);
  }

  hostUpdated(): void {
    labelTables(this.#host);
  }

  #schedule(): void {
    cancelAnimationFrame(this.#frame);
    this.#frame = requestAnimationFrame(() => labelTables(this.#host));
  }
}

/**
 * A data table's body rows: one per item, or, when there is none, one muted row across all `columns` that
 * says so (`empty`, e.g. "No token yet.").
 */
export function bodyRows<T>(
  items: readonly T[],
  options: { columns: number; empty: string },
  row: (item: T) => TemplateResult,
): TemplateResult | TemplateResult[] {
  if (items.length > 0) return items.map(row);
  return html`
    <tr>
      <td colspan=${String(options.columns)} class="muted">${options.empty}</td>
    </tr>
  `;
}
