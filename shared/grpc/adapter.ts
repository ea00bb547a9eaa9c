/**
 * Typed gRPC services and clients on `@grpc/grpc-js`, built from the
 * service descriptors that protoc-gen-es generates into `shared/gen/`.
 *
 * Messages travel as protobuf binary (`toBinary`/`fromBinary`); grpc-js only
 * moves the bytes. Handlers receive decoded messages and return plain
 * initializers; clients send initializers and receive decoded messages.
 * Errors meant for the caller are thrown as {@link GrpcError}; anything else
 * reaches the client as INTERNAL "internal error" and is logged on the
 * server only.
 *
 * Client-streaming and bidirectional methods are not supported: no service
 * of svc uses them.
 *
 * @module
 */

import { Buffer } from "node:buffer";
import * as grpc from "@grpc/grpc-js";
import { create, fromBinary, toBinary } from "@bufbuild/protobuf";
import type {
  DescMessage,
  DescMethod,
  DescService,
  MessageInitShape,
  MessageShape,
} from "@bufbuild/protobuf";
import type { GenService, GenServiceMethods } from "@bufbuild/protobuf/codegenv2";

/** Any generated service descriptor, e.g. `PolicyService` from `policy_pb.ts`. */
export type AnyService = GenService<GenServiceMethods>;

type MethodsOf<S extends AnyService> = S["method"];

/**
 * An error a handler throws on purpose: the client receives `code` and
 * `message` unchanged, so the message must be meant for a person and must not
 * carry internals.
 */
export class GrpcError extends Error {
  /** gRPC status code, e.g. `grpc.status.NOT_FOUND`. */
  readonly code: grpc.status;
  /** Trailing metadata sent along with the status, if any. */
  readonly metadata?: grpc.Metadata;

  /**
   * @param code gRPC status code sent to the client.
   * @param message Human-readable explanation sent to the client.
   * @param options `cause` stays on the server; `metadata` is sent as trailers.
   */
  constructor(
    code: grpc.status,
    message: string,
    options: { cause?: unknown; metadata?: grpc.Metadata } = {},
  ) {
    super(message, { cause: options.cause });
    this.name = "GrpcError";
    this.code = code;
    this.metadata = options.metadata;
  }
}

/** Options for how the server side reports unexpected handler errors. */
export interface ErrorReportingOptions {
  /**
   * Called with every error that is not a {@link GrpcError}, and the method
   * path. Defaults to `console.error`.
   */
  onUnexpectedError?: (error: unknown, path: string) => void;
  /**
   * Turns errors the caller should hear about (e.g. an unreachable database → UNAVAILABLE) into a
   * {@link GrpcError} before the INTERNAL fallback applies; undefined leaves the error as it is.
   */
  translateError?: (error: unknown) => GrpcError | undefined;
}

/** The status sent to a client for a failed call. */
export interface CallStatus {
  code: grpc.status;
  details: string;
  metadata?: grpc.Metadata;
}

/**
 * Maps anything a handler threw to the status the client receives: a
 * {@link GrpcError} keeps its code and message; anything else becomes
 * INTERNAL "internal error" and is passed to `onUnexpectedError`, so details
 * never leak to the client.
 */
export function statusFromError(
  error: unknown,
  options: ErrorReportingOptions & { path?: string } = {},
): CallStatus {
  error = options.translateError?.(error) ?? error;
  if (error instanceof GrpcError) {
    return { code: error.code, details: error.message, metadata: error.metadata };
  }
  const report = options.onUnexpectedError ?? logUnexpectedError;
  report(error, options.path ?? "");
  return { code: grpc.status.INTERNAL, details: "internal error" };
}

function logUnexpectedError(error: unknown, path: string): void {
  console.error(`grpc: ${path || "call"} failed:`, error);
}

/**
 * What a unary handler gets to know about its call: a small subset of the
 * grpc-js call, so that another HTTP/2 server (the web port) can supply it
 * and serve gRPC requests with the same handlers.
 */
export type UnaryCallContext = Pick<
  grpc.ServerUnaryCall<unknown, unknown>,
  "metadata" | "cancelled" | "getPeer" | "getAuthContext" | "getDeadline" | "getPath"
>;

/**
 * The grpc-js server stream of a server-streaming handler. `write` takes a
 * message initializer, or a `Uint8Array` holding an already encoded message
 * of the output type (so one encoding can be written to many streams).
 */
export type ServerStreamCall<I extends DescMessage, O extends DescMessage> = grpc.ServerWritableStream<
  MessageShape<I>,
  MessageInitShape<O> | Uint8Array
>;

/** Handler of a unary method; it may return the response or a promise of it. */
export type UnaryHandler<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
  call: UnaryCallContext,
) => MessageInitShape<O> | Promise<MessageInitShape<O>>;

/**
 * Handler of a server-streaming method. The stream is ended with status OK
 * when the handler returns (or its promise resolves), and with the mapped
 * error status when it throws (or its promise rejects).
 */
export type ServerStreamHandler<I extends DescMessage, O extends DescMessage> = (
  request: MessageShape<I>,
  call: ServerStreamCall<I, O>,
) => void | Promise<void>;

/** One handler per method of service `S`, keyed by the method's local (camelCase) name. */
export type ServiceHandlers<S extends AnyService> = {
  [K in keyof MethodsOf<S>]: MethodsOf<S>[K] extends {
    methodKind: "unary";
    input: infer I extends DescMessage;
    output: infer O extends DescMessage;
  } ? UnaryHandler<I, O>
    : MethodsOf<S>[K] extends {
      methodKind: "server_streaming";
      input: infer I extends DescMessage;
      output: infer O extends DescMessage;
    } ? ServerStreamHandler<I, O>
    : never;
};

/**
 * Builds the grpc-js service definition of a generated service. Keys are the
 * methods' local names; paths are `/<package>.<Service>/<Method>`.
 */
export function createServiceDefinition(service: DescService): grpc.ServiceDefinition {
  const definition: Record<string, grpc.MethodDefinition<unknown, unknown>> = {};
  for (const method of service.methods) {
    definition[method.localName] = methodDefinition(method);
  }
  return definition;
}

function methodDefinition(method: DescMethod): grpc.MethodDefinition<unknown, unknown> {
  return {
    path: methodPath(method),
    originalName: method.name,
    requestStream: method.methodKind === "client_streaming" || method.methodKind === "bidi_streaming",
    responseStream: method.methodKind === "server_streaming" || method.methodKind === "bidi_streaming",
    requestSerialize: (value) => encode(method.input, value),
    requestDeserialize: (bytes) => fromBinary(method.input, bytes),
    responseSerialize: (value) => encode(method.output, value),
    responseDeserialize: (bytes) => fromBinary(method.output, bytes),
  };
}

function methodPath(method: DescMethod): string {
  return `/${method.parent.typeName}/${method.name}`;
}

function encode(schema: DescMessage, value: unknown): Buffer {
  if (value instanceof Uint8Array) {
    return Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  }
  const bytes = toBinary(schema, create(schema, value as MessageInitShape<DescMessage>));
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/**
 * Wraps typed handlers into the grpc-js implementation object for
 * `server.addService(createServiceDefinition(service), implementation)`.
 * Throws when the service has a client-streaming or bidirectional method.
 */
export function createServiceImplementation<S extends AnyService>(
  service: S,
  handlers: ServiceHandlers<S>,
  options: ErrorReportingOptions = {},
): grpc.UntypedServiceImplementation {
  const implementation: grpc.UntypedServiceImplementation = {};
  const byName = handlers as Record<string, unknown>;
  for (const method of service.methods) {
    const handler = byName[method.localName];
    if (typeof handler !== "function") {
      throw new Error(`no handler for ${methodPath(method)}`);
    }
    switch (method.methodKind) {
      case "unary":
        implementation[method.localName] = serveUnary(
          method,
          handler as UnaryHandler<DescMessage, DescMessage>,
          options,
        );
        break;
      case "server_streaming":
        implementation[method.localName] = serveServerStream(
          method,
          handler as ServerStreamHandler<DescMessage, DescMessage>,
          options,
        );
        break;
      default:
        throw new Error(`${methodPath(method)}: ${method.methodKind} methods are not supported`);
    }
  }
  return implementation;
}

function serveUnary(
  method: DescMethod,
  handler: UnaryHandler<DescMessage, DescMessage>,
  options: ErrorReportingOptions,
): grpc.handleUnaryCall<MessageShape<DescMessage>, MessageInitShape<DescMessage>> {
  const path = methodPath(method);
  return (call, callback) => {
    invoke(() => handler(call.request, call)).then(
      (response) => callback(null, response),
      (error) => callback(statusFromError(error, { ...options, path })),
    );
  };
}

function serveServerStream(
  method: DescMethod,
  handler: ServerStreamHandler<DescMessage, DescMessage>,
  options: ErrorReportingOptions,
): grpc.handleServerStreamingCall<MessageShape<DescMessage>, MessageInitShape<DescMessage> | Uint8Array> {
  const path = methodPath(method);
  return (call) => {
    invoke(() => handler(call.request, call)).then(
      () => {
        if (!call.writableEnded) call.end();
      },
      (error) => {
        // After a cancellation or an explicit end there is no status left to send.
        if (call.cancelled || call.writableEnded) return;
        call.emit("error", statusFromError(error, { ...options, path }));
      },
    );
  };
}

/** Runs a handler so that a synchronous throw becomes a rejection. */
async function invoke<T>(run: () => T | Promise<T>): Promise<T> {
  return await run();
}

/** Per-call options of a typed client. */
export interface CallOptions {
  /** Request metadata (headers). */
  metadata?: grpc.Metadata;
  /** Absolute deadline: a `Date` or milliseconds since the epoch. */
  deadline?: grpc.Deadline;
  /** Cancels the call when aborted. */
  signal?: AbortSignal;
}

/**
 * Response of a server-streaming call: iterate it with `for await`. Errors,
 * including cancellation, are thrown from the iteration as {@link GrpcError};
 * leaving the loop early cancels the call.
 */
export interface ServerStream<T> extends AsyncIterable<T> {
  /** Cancels the call; the iteration then ends with CANCELLED. */
  cancel(): void;
  /** The underlying grpc-js call (response metadata, status events, peer). */
  readonly call: grpc.ClientReadableStream<T>;
}

/** Typed client of service `S`: one method per RPC, keyed by local name. */
export type ServiceClient<S extends AnyService> =
  & {
    [K in keyof MethodsOf<S>]: MethodsOf<S>[K] extends {
      methodKind: "unary";
      input: infer I extends DescMessage;
      output: infer O extends DescMessage;
    } ? (request: MessageInitShape<I>, options?: CallOptions) => Promise<MessageShape<O>>
      : MethodsOf<S>[K] extends {
        methodKind: "server_streaming";
        input: infer I extends DescMessage;
        output: infer O extends DescMessage;
      } ? (request: MessageInitShape<I>, options?: CallOptions) => ServerStream<MessageShape<O>>
      : never;
  }
  & {
    /** Closes the channel; no new calls can be made on this client. */
    close(): void;
    /** The underlying grpc-js client (connectivity, waitForReady). */
    readonly grpcClient: grpc.Client;
  };

/** Connection settings of {@link createClient}. */
export interface ClientOptions {
  /** Channel credentials: `grpc.credentials.createSsl(ca, key, cert)` or insecure in tests. */
  credentials: grpc.ChannelCredentials;
  /** grpc-js channel options, e.g. `{"grpc.max_receive_message_length": 8 << 20}`. */
  channelOptions?: grpc.ChannelOptions;
}

type UnaryCallback = (error: grpc.ServiceError | null, response?: unknown) => void;
type RawUnary = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  callback: UnaryCallback,
) => grpc.ClientUnaryCall;
type RawServerStream = (
  request: unknown,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
) => grpc.ClientReadableStream<unknown>;

/**
 * Creates a typed client of a generated service, on a grpc-js client built
 * with `makeClientConstructor`. `target` is `host:port`.
 */
export function createClient<S extends AnyService>(
  service: S,
  target: string,
  options: ClientOptions,
): ServiceClient<S> {
  const Constructor = grpc.makeClientConstructor(createServiceDefinition(service), service.typeName);
  const raw = new Constructor(target, options.credentials, options.channelOptions);
  const methods = raw as unknown as Record<string, RawUnary & RawServerStream>;
  const client: Record<string, unknown> = {
    close: () => raw.close(),
    grpcClient: raw,
  };
  for (const method of service.methods) {
    const call = methods[method.localName].bind(raw);
    client[method.localName] = method.methodKind === "server_streaming"
      ? (request: unknown, callOptions: CallOptions = {}) => callServerStream(call, request, callOptions)
      : (request: unknown, callOptions: CallOptions = {}) => callUnary(call, request, callOptions);
  }
  return client as ServiceClient<S>;
}

function callUnary(call: RawUnary, request: unknown, options: CallOptions): Promise<unknown> {
  return new Promise((resolve, reject) => {
    let stopOnAbort = () => {};
    const metadata = options.metadata ?? new grpc.Metadata();
    const pending = call(request, metadata, { deadline: options.deadline }, (error, response) => {
      stopOnAbort();
      if (error) reject(fromServiceError(error));
      else resolve(response);
    });
    stopOnAbort = onAbort(options.signal, () => pending.cancel());
  });
}

function callServerStream(
  call: RawServerStream,
  request: unknown,
  options: CallOptions,
): ServerStream<unknown> {
  const stream = call(request, options.metadata ?? new grpc.Metadata(), { deadline: options.deadline });
  const stopOnAbort = onAbort(options.signal, () => stream.cancel());
  async function* iterate(): AsyncGenerator<unknown> {
    try {
      for await (const message of stream) yield message;
    } catch (error) {
      throw fromServiceError(error);
    } finally {
      stopOnAbort();
      stream.cancel();
    }
  }
  return {
    [Symbol.asyncIterator]: iterate,
    cancel: () => stream.cancel(),
    call: stream,
  };
}

/** Calls `cancel` when `signal` aborts (at once if it already has); returns the unsubscribe function. */
function onAbort(signal: AbortSignal | undefined, cancel: () => void): () => void {
  if (!signal) return () => {};
  if (signal.aborted) {
    cancel();
    return () => {};
  }
  signal.addEventListener("abort", cancel, { once: true });
  return () => signal.removeEventListener("abort", cancel);
}

/** Turns a grpc-js client error into a GrpcError with the server's message. */
function fromServiceError(error: unknown): unknown {
  if (error instanceof Error && "code" in error && typeof error.code === "number") {
    const details = "details" in error && typeof error.details === "string" ? error.details : error.message;
    const metadata = "metadata" in error && error.metadata instanceof grpc.Metadata
      ? error.metadata
      : undefined;
    return new GrpcError(error.code, details, { cause: error, metadata });
  }
  return error;
}
