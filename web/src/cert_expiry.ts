/**
 * Agent certificate expiry buckets as the server names them (`cert_expiry` of `GET /nodes`, `certificates` of
 * the dashboard summary), in drawing order, with the words the console shows: the dashboard counts them and
 * the node list filters by them, so a number and its list use the same names.
 */
export const CERT_EXPIRY_BUCKETS = [
  { key: "expired", label: "Expired" },
  { key: "within_7_days", label: "Within 7 days" },
  { key: "within_30_days", label: "Within 30 days" },
  { key: "within_90_days", label: "Within 90 days" },
  { key: "later", label: "Later" },
  { key: "none", label: "No certificate" },
  { key: "revoked", label: "Revoked" },
] as const;

/** A bucket's key. */
export type CertExpiryBucket = (typeof CERT_EXPIRY_BUCKETS)[number]["key"];
