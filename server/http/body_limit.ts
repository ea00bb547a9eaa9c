/**
 * Reading a raw request body (an upload, a bundle) with a byte limit: the read stops, and the refusal the
 * caller names is thrown, as soon as more than the limit has arrived, so an oversized body is never buffered
 * whole. The loop itself lives in shared/bytes.ts (the agent's zip reader uses it too).
 */
export { readCapped } from "../../shared/bytes.ts";
