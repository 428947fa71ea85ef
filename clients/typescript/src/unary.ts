// Lean unary reads: the node's read calls (GetItem, ListItems, Get...) sent
// straight on the client's HTTP/2 connection, one gRPC frame each way.
// Connect's unary path builds, per call, an AbortController linked to a
// deadline controller that it aborts when the call succeeds (a DOMException
// and an abort event), a sentinel that makes a ConnectError on close, web
// Headers objects and async-iterator pipes; at thousands of small reads a
// second that is most of the client's CPU and garbage. A read made with any
// call option (signal, timeout, headers, context values) and every write
// and stream still go through Connect, unchanged.
import { create, fromBinary, isMessage, toBinary } from "@bufbuild/protobuf";
import type { DescMethodUnary, DescMessage } from "@bufbuild/protobuf";
import { Code, ConnectError } from "@connectrpc/connect";
import type { Transport, UnaryResponse } from "@connectrpc/connect";
import { codeFromHttpStatus, findTrailerError } from "@connectrpc/connect/protocol-grpc";
import type { Http2SessionManager } from "@connectrpc/connect-node";
import type { ClientHttp2Stream, IncomingHttpHeaders } from "node:http2";
import { constants } from "node:http2";
import { withRetries } from "./retry.js";
import type { RetryPolicy } from "./retry.js";

/**
 * A transport that sends the reads isRead names with no call options over
 * sessions itself (retried under policy, as the Connect path's interceptor
 * does), and every other call through base.
 */
export function leanReads(
  base: Transport,
  sessions: Http2SessionManager,
  headers: Record<string, string>,
  policy: RetryPolicy,
  isRead: (typeName: string, method: string) => boolean,
): Transport {
  const request = { ...headers, "content-type": "application/grpc+proto", te: "trailers" };
  return {
    unary(method, signal, timeoutMs, header, input, contextValues) {
      if (
        signal !== undefined ||
        timeoutMs !== undefined ||
        header !== undefined ||
        contextValues !== undefined ||
        !isRead(method.parent.typeName, method.name)
      ) {
        return base.unary(method, signal, timeoutMs, header, input, contextValues);
      }
      const path = `/${method.parent.typeName}/${method.name}`;
      const body = frame(method.input, input);
      return withRetries(policy, true, undefined, async () => {
        const stream = await sessions.request("POST", path, request, {});
        return exchange(sessions, stream, body, method);
      });
    },
    stream: base.stream.bind(base),
  };
}

// The request message in a gRPC frame: no compression flag, the length, the bytes.
function frame(desc: DescMessage, input: unknown): Buffer {
  const msg = isMessage(input, desc) ? input : create(desc, input as never);
  const bytes = toBinary(desc, msg);
  const out = Buffer.allocUnsafe(5 + bytes.length);
  out[0] = 0;
  out.writeUInt32BE(bytes.length, 1);
  out.set(bytes, 5);
  return out;
}

// Sends body, reads the answer and its status; the gRPC status (trailers, or
// the headers of a trailers-only answer) is the ConnectError Connect's path
// would make of it, status details included.
function exchange<I extends DescMessage, O extends DescMessage>(
  sessions: Http2SessionManager,
  stream: ClientHttp2Stream,
  body: Buffer,
  method: DescMethodUnary<I, O>,
) {
  return new Promise<UnaryResponse<I, O>>((resolve, reject) => {
    let head: IncomingHttpHeaders | undefined;
    let trailers: IncomingHttpHeaders | undefined;
    let failure: unknown;
    const chunks: Buffer[] = [];
    stream.on("response", (h) => (head = h));
    stream.on("trailers", (t) => (trailers = t));
    stream.on("data", (c: Buffer) => {
      chunks.push(c);
      sessions.notifyResponseByteRead(stream);
    });
    stream.on("error", (e) => (failure ??= e));
    stream.on("close", () => {
      try {
        const message = answer(head, trailers, chunks, stream.rstCode, failure, method.output);
        resolve(response(method, message, head!, trailers ?? {}));
      } catch (e) {
        reject(e);
      }
    });
    stream.end(body);
  });
}

function answer<O extends DescMessage>(
  head: IncomingHttpHeaders | undefined,
  trailers: IncomingHttpHeaders | undefined,
  chunks: Buffer[],
  rstCode: number,
  failure: unknown,
  output: O,
) {
  if (head === undefined) {
    // Nothing came back: the stream or the connection broke before an answer.
    const reason = failure instanceof Error ? failure.message : `stream reset (code ${rstCode})`;
    throw new ConnectError(reason, rstCode === constants.NGHTTP2_CANCEL ? Code.Canceled : Code.Unavailable);
  }
  const status = Number(head[":status"] ?? 0);
  const grpcStatus = (trailers ?? head)["grpc-status"];
  if (grpcStatus !== "0") {
    // Made only on failure: web Headers are what costs on every call.
    const err = grpcStatus === undefined ? undefined : findTrailerError(webHeaders(trailers ?? head));
    if (err !== undefined) throw err;
    if (status !== 200) throw new ConnectError(`HTTP ${status}`, codeFromHttpStatus(status));
    throw new ConnectError(`the answer ended without a gRPC status${failure ? `: ${failure}` : ""}`, Code.Unavailable);
  }
  const data = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
  if (data.length < 5) throw new ConnectError("the answer has no message", Code.Internal);
  if (data[0] !== 0) throw new ConnectError("the answer is compressed, which reads do not ask for", Code.Internal);
  const len = data.readUInt32BE(1);
  if (data.length !== 5 + len) throw new ConnectError("the answer is not one message", Code.Internal);
  return fromBinary(output, data.subarray(5));
}

function webHeaders(h: IncomingHttpHeaders): Headers {
  const out = new Headers();
  for (const [k, v] of Object.entries(h)) {
    if (k.startsWith(":") || v === undefined) continue;
    for (const x of Array.isArray(v) ? v : [v]) out.append(k, x);
  }
  return out;
}

// Connect's answer shape; header and trailer are made only if a caller
// asks for them (onHeader, onTrailer).
function response<I extends DescMessage, O extends DescMessage>(
  method: DescMethodUnary<I, O>,
  message: ReturnType<typeof fromBinary<O>>,
  head: IncomingHttpHeaders,
  trailers: IncomingHttpHeaders,
): UnaryResponse<I, O> {
  return {
    stream: false,
    service: method.parent,
    method,
    message,
    get header() {
      return webHeaders(head);
    },
    get trailer() {
      return webHeaders(trailers);
    },
  } as UnaryResponse<I, O>;
}
