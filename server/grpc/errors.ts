/**
 * Server errors that gRPC callers should hear about in their own terms, for the adapter's `translateError`:
 * an unreachable database or full storage is UNAVAILABLE (agents retry with backoff), not INTERNAL.
 */
import * as grpc from "@grpc/grpc-js";
import { GrpcError } from "../../shared/grpc/adapter.ts";
import { DatabaseUnavailableError, isStorageFull } from "../db/db.ts";

/** The gRPC form of a server error, or undefined to let the adapter treat it as unexpected. */
export function grpcErrorOf(error: unknown): GrpcError | undefined {
  if (error instanceof DatabaseUnavailableError) {
    return new GrpcError(grpc.status.UNAVAILABLE, "the database is unreachable; retry later", {
      cause: error,
    });
  }
  if (isStorageFull(error)) {
    // UNAVAILABLE, not RESOURCE_EXHAUSTED: agents retry it with backoff, and the write works once space is freed.
    return new GrpcError(grpc.status.UNAVAILABLE, "the server's storage is full; retry later", {
      cause: error,
    });
  }
  return undefined;
}
