/**
 * Unary gRPC over a `node:http2` compatibility request/response pair, for the services the web port serves
 * next to the REST app (the enrollment service). It speaks the gRPC HTTP/2 protocol directly: reads the
 * length-prefixed request message, decodes it with the generated descriptor, calls the typed handler and
 * answers with one length-prefixed message plus `grpc-status` trailers (only the trailers on error). Only
 * unary methods and uncompressed messages are supported (all a gRPC client sends unless asked).
 */
import type { Http2ServerRequest, Http2ServerResponse } from "node:http2";
import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { create, type DescMessage, type DescService, fromBinary, toBinary } from "@bufbuild/protobuf";
import { GrpcError, statusFromError } from "../../shared/grpc/adapter.ts";
import type { Logger } from "../core/log.ts";
import type { EnrollmentPeer } from "./enrollment_service.ts";
import { grpcErrorOf } from "./errors.ts";

/** Largest request message accepted (spec: 8 MiB). */
export const MAX_GRPC_MESSAGE_BYTES = 8 << 20;

/** A transport-agnostic unary handler. */
export type PeerHandler = (request: never, peer: EnrollmentPeer) => Promise<unknown>;

/** What {@link serveGrpcUnary} serves. */
export interface GrpcBridgeOptions {
  service: DescService;
  /** Handlers by method local name (e.g. `enroll`). */
  handlers: Record<string, PeerHandler>;
  /** Method names (e.g. `Enroll`) callable without a verified client certificate. */
  certificateExempt: ReadonlySet<string>;
  peer: EnrollmentPeer;
  log: Logger;
}

/** Answers one gRPC request. Never throws: every failure becomes a gRPC status. */
export async function serveGrpcUnary(
  req: Http2ServerRequest,
  res: Http2ServerResponse,
  options: GrpcBridgeOptions,
): Promise<void> {
  const path = req.url.split("?")[0];
  try {
    if (req.method !== "POST") {
      res.writeHead(405, { allow: "POST", "content-type": "text/plain" });
      res.end("gRPC requests must use POST\n");
      return;
    }
    const match = /^\/([^/]+)\/([^/]+)$/.exec(path);
    const methodName = match?.[2] ?? "";
    const method = match?.[1] === options.service.typeName
      ? options.service.methods.find((m) => m.name === methodName)
      : undefined;
    if (!options.certificateExempt.has(methodName) && !options.peer.verifiedCert) {
      throw new GrpcError(
        grpc.status.UNAUTHENTICATED,
        "this method requires a client certificate issued by the server's CA",
      );
    }
    if (!method || method.methodKind !== "unary" || !options.handlers[method.localName]) {
      throw new GrpcError(grpc.status.UNIMPLEMENTED, `unknown method ${path}`);
    }
    const encoding = req.headers["grpc-encoding"];
    if (encoding !== undefined && encoding !== "identity") {
      throw new GrpcError(
        grpc.status.UNIMPLEMENTED,
        `grpc-encoding ${encoding} is not supported; send uncompressed messages`,
      );
    }
    const body = await readBody(req, MAX_GRPC_MESSAGE_BYTES + 5);
    const request = decodeRequest(method.input, body);
    const handler = options.handlers[method.localName] as (r: unknown, p: EnrollmentPeer) => Promise<unknown>;
    const response = await handler(request, options.peer);
    const bytes = toBinary(method.output, create(method.output, response as Record<string, unknown>));
    res.writeHead(200, { "content-type": "application/grpc+proto" });
    res.write(frame(bytes));
    res.addTrailers({ "grpc-status": String(grpc.status.OK), "grpc-message": "" });
    res.end();
  } catch (err) {
    const status = statusFromError(err, {
      path,
      translateError: grpcErrorOf,
      onUnexpectedError: (error) =>
        options.log.error("web port: gRPC call failed", { method: path, error: String(error) }),
    });
    // Status in trailers after response headers. (A trailers-only response needs END_STREAM on the one
    // HEADERS frame, which the compat API in this runtime does not produce; clients accept both forms.)
    if (!res.headersSent) res.writeHead(200, { "content-type": "application/grpc+proto" });
    res.addTrailers({ "grpc-status": String(status.code), "grpc-message": percentEncode(status.details) });
    res.end();
  }
}

async function readBody(req: Http2ServerRequest, limit: number): Promise<Uint8Array> {
  const chunks: Uint8Array[] = [];
  let total = 0;
  for await (const chunk of req as AsyncIterable<Uint8Array>) {
    total += chunk.byteLength;
    if (total > limit) {
      throw new GrpcError(
        grpc.status.RESOURCE_EXHAUSTED,
        `request message is larger than ${MAX_GRPC_MESSAGE_BYTES} bytes`,
      );
    }
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}

/** Reads exactly one uncompressed length-prefixed message. */
function decodeRequest(schema: DescMessage, body: Uint8Array): unknown {
  if (body.byteLength < 5) {
    throw new GrpcError(grpc.status.INVALID_ARGUMENT, "request carries no gRPC message");
  }
  const view = new DataView(body.buffer, body.byteOffset, body.byteLength);
  if (body[0] !== 0) {
    throw new GrpcError(
      grpc.status.UNIMPLEMENTED,
      "compressed gRPC messages are not supported; send them uncompressed",
    );
  }
  const length = view.getUint32(1);
  if (length > MAX_GRPC_MESSAGE_BYTES) {
    throw new GrpcError(
      grpc.status.RESOURCE_EXHAUSTED,
      `request message is larger than ${MAX_GRPC_MESSAGE_BYTES} bytes`,
    );
  }
  if (body.byteLength !== 5 + length) {
    throw new GrpcError(grpc.status.INVALID_ARGUMENT, "a unary request must carry exactly one gRPC message");
  }
  try {
    return fromBinary(schema, body.subarray(5));
  } catch {
    throw new GrpcError(grpc.status.INVALID_ARGUMENT, `request is not a valid ${schema.typeName} message`);
  }
}

/** One length-prefixed, uncompressed gRPC message. */
function frame(message: Uint8Array): Uint8Array {
  const out = new Uint8Array(5 + message.byteLength);
  new DataView(out.buffer).setUint32(1, message.byteLength);
  out.set(message, 5);
  return out;
}

/** Percent-encodes `grpc-message` as the gRPC protocol requires (UTF-8, every byte outside 0x20-0x7E and '%'). */
export function percentEncode(text: string): string {
  let out = "";
  for (const byte of new TextEncoder().encode(text)) {
    out += byte >= 0x20 && byte <= 0x7e && byte !== 0x25
      ? String.fromCharCode(byte)
      : `%${byte.toString(16).toUpperCase().padStart(2, "0")}`;
  }
  return out;
}
