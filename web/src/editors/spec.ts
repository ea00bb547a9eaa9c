/** What a policy type's editor adds to the form generated from its content message. */

/** Hints for the generated form. */
export interface FormHints {
  /** Allowed values by rule path (`Cookies.Behavior`, `Bookmarks[].Placement`, `Preferences.*.Status`). */
  enums?: Record<string, readonly (string | number)[]>;
  /** json_name of the free-form escape hatch (`additional`), shown last in its own group. */
  escapeHatch?: string;
}

/** One editor per policy type (`web/src/editors/<type>.ts`). */
export interface EditorSpec {
  /** Wire name of the type. */
  type: string;
  /** Hints for the generated form (allowed values, escape hatch). */
  hints: FormHints;
}
