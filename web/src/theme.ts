/** Light, dark or follow the system; the choice is kept in `localStorage`. */

/** What the person picked. */
export type ThemeChoice = "system" | "light" | "dark";

const KEY = "svc-theme";
const media = globalThis.matchMedia?.("(prefers-color-scheme: dark)");

/** The stored choice (default: follow the system). */
export function storedTheme(): ThemeChoice {
  const v = localStorage.getItem(KEY);
  return v === "light" || v === "dark" ? v : "system";
}

function paint(choice: ThemeChoice): void {
  const dark = choice === "dark" || (choice === "system" && media?.matches === true);
  document.documentElement.classList.toggle("sl-theme-dark", dark);
  document.documentElement.classList.toggle("sl-theme-light", !dark);
}

/** Applies and stores a choice; "system" follows later changes of the system setting too. */
export function applyTheme(choice: ThemeChoice): void {
  if (choice === "system") localStorage.removeItem(KEY);
  else localStorage.setItem(KEY, choice);
  paint(choice);
}

media?.addEventListener("change", () => paint(storedTheme()));
