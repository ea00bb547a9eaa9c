/**
 * Colours of states in the trend charts: Shoelace tokens whose lines keep at least 3:1 against a card in the
 * light and the dark theme (a chart's line must be seen, not only its legend read). One state has one colour
 * on every chart.
 */
export const TREND_COLORS = {
  compliant: "var(--sl-color-success-600)",
  non_compliant: "var(--sl-color-danger-500)",
  error: "var(--sl-color-danger-700)",
  pending: "var(--sl-color-warning-600)",
  unknown: "var(--sl-color-warning-600)",
  inapplicable: "var(--sl-color-neutral-500)",
  online: "var(--sl-color-success-600)",
  degraded: "var(--sl-color-warning-600)",
  offline: "var(--sl-color-neutral-600)",
  never_seen: "var(--sl-color-primary-600)",
  share: "var(--sl-color-primary-600)",
} as const;

/** "10 Mar, 14:00" in the reader's time zone: an hourly bucket. */
export function hourLabel(t: number): string {
  return new Date(t).toLocaleString(undefined, {
    day: "numeric",
    month: "short",
    hour: "2-digit",
    minute: "2-digit",
  });
}

/** "10 Mar 2024": a daily bucket (UTC days, named as such whatever the reader's zone). */
export function dayLabel(t: number): string {
  return new Date(t).toLocaleDateString(undefined, {
    day: "numeric",
    month: "short",
    year: "numeric",
    timeZone: "UTC",
  });
}
