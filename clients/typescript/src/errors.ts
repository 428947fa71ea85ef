// One error class per agentstate code (agentstate.common.v1.ErrorCode).
//
// The node sends each code as the gRPC status of the same name, except
// OUTCOME_UNKNOWN, which gRPC lacks: it travels as DEADLINE_EXCEEDED, as does
// a client's own deadline; both mean "may have been applied". Every status the
// node sends also carries an agentstate.common.v1.Error with the exact code in
// its details (grpc-status-details-bin): when present it wins, and
// codeFromDetails is true. A status without it is the transport's own.
import { Code, ConnectError } from "@connectrpc/connect";
import { ErrorCode, ErrorSchema } from "./gen/agentstate/common/v1/common_pb.js";
import type { Error as ErrorProto } from "./gen/agentstate/common/v1/common_pb.js";
import { SequenceMismatchSchema } from "./gen/agentstate/session/v1/session_pb.js";

export { ErrorCode };

export interface ErrorOptions {
  /** The gRPC status code it arrived with; by default the one the node sends this code as. */
  grpcCode?: Code;
  /** Whether the code was read from the node's status details. */
  codeFromDetails?: boolean;
  /** The status's metadata (headers and trailers) and details, when it came from one. */
  metadata?: Headers;
  details?: ConnectError["details"];
  cause?: unknown;
}

/**
 * A failure reported by agentstate, or by the transport on its behalf.
 * Nothing was stored, except possibly for OutcomeUnknown. It is a
 * ConnectError too (`code` is the gRPC status code, `rawMessage` the node's
 * message, findDetails() reads the status details), so it passes unchanged
 * through Connect's clients and interceptors; `errorCode` is agentstate's.
 * Its `name` stays "ConnectError", which is how Connect recognizes its
 * errors across copies of its package; the class is the error's kind.
 */
export class AgentStateError extends ConnectError {
  /** The agentstate code (agentstate.common.v1.ErrorCode). */
  readonly errorCode: ErrorCode;
  /** Whether errorCode was read from the node's status details rather than derived from the gRPC code. */
  readonly codeFromDetails: boolean;

  constructor(message: string, opts: ErrorOptions = {}) {
    const errorCode = (new.target as unknown as { errorCode: ErrorCode }).errorCode ?? ErrorCode.UNSPECIFIED;
    super(message, opts.grpcCode ?? GRPC_OF[errorCode] ?? Code.Unknown, opts.metadata, undefined, opts.cause);
    if (opts.details !== undefined) this.details = opts.details;
    this.errorCode = errorCode;
    this.codeFromDetails = opts.codeFromDetails ?? false;
  }

  // ConnectError's instanceof accepts anything shaped like a ConnectError;
  // the agentstate classes are told apart by their prototype chain, as usual.
  static override [Symbol.hasInstance](v: unknown): boolean {
    return Function.prototype[Symbol.hasInstance].call(this, v);
  }
}

/** The request is malformed; retrying it can never succeed. */
export class InvalidArgument extends AgentStateError {
  static readonly errorCode = ErrorCode.INVALID_ARGUMENT;
}
/** The named session, plan or entry does not exist. */
export class NotFound extends AgentStateError {
  static readonly errorCode = ErrorCode.NOT_FOUND;
}
/** The entity exists already with different fields. */
export class AlreadyExists extends AgentStateError {
  static readonly errorCode = ErrorCode.ALREADY_EXISTS;
}
/** The entity's state refuses the request (a closed session, a conditional write whose condition failed). */
export class FailedPrecondition extends AgentStateError {
  static readonly errorCode = ErrorCode.FAILED_PRECONDITION;
}
/** A conditional write (expectedNextSequence) found another next sequence; nothing of it was stored. */
export class SequenceMismatch extends FailedPrecondition {
  constructor(
    message: string,
    readonly expectedNextSequence: bigint,
    readonly nextSequence: bigint,
    opts: ErrorOptions = {},
  ) {
    super(message, opts);
  }
}
/** The node's backlog or the database is full; retry later. */
export class ResourceExhausted extends AgentStateError {
  static readonly errorCode = ErrorCode.RESOURCE_EXHAUSTED;
}
/** Nothing was stored (not sent, node stopping, transient store failure); retry. */
export class Unavailable extends AgentStateError {
  static readonly errorCode = ErrorCode.UNAVAILABLE;
}
/** A bug or an unexpected store failure; nothing was committed. */
export class Internal extends AgentStateError {
  static readonly errorCode = ErrorCode.INTERNAL;
}
/** The call lacked the node's bearer token. */
export class Unauthenticated extends AgentStateError {
  static readonly errorCode = ErrorCode.UNAUTHENTICATED;
}
/**
 * The credentials may read the entity but their grants do not allow this
 * request on it (a reader appending, a writer deleting). Nothing was stored;
 * retrying with the same credentials cannot succeed.
 */
export class PermissionDenied extends AgentStateError {
  static readonly errorCode = ErrorCode.PERMISSION_DENIED;
}
/**
 * The request may or may not have been applied. Unlike Unavailable,
 * something may have been stored: retry only a request carrying its client
 * id (appends with message ids, a create with a session id, a plan error
 * with a record id, an audit record with an event id).
 */
export class OutcomeUnknown extends AgentStateError {
  static readonly errorCode = ErrorCode.OUTCOME_UNKNOWN;
}

// The gRPC status each code travels as (messages/errs); OUTCOME_UNKNOWN,
// which gRPC lacks, as DEADLINE_EXCEEDED.
const GRPC_OF: Partial<Record<ErrorCode, Code>> = {
  [ErrorCode.INVALID_ARGUMENT]: Code.InvalidArgument,
  [ErrorCode.NOT_FOUND]: Code.NotFound,
  [ErrorCode.ALREADY_EXISTS]: Code.AlreadyExists,
  [ErrorCode.FAILED_PRECONDITION]: Code.FailedPrecondition,
  [ErrorCode.RESOURCE_EXHAUSTED]: Code.ResourceExhausted,
  [ErrorCode.UNAVAILABLE]: Code.Unavailable,
  [ErrorCode.INTERNAL]: Code.Internal,
  [ErrorCode.UNAUTHENTICATED]: Code.Unauthenticated,
  [ErrorCode.PERMISSION_DENIED]: Code.PermissionDenied,
  [ErrorCode.OUTCOME_UNKNOWN]: Code.DeadlineExceeded,
};

type ErrorClass = new (message: string, opts?: ErrorOptions) => AgentStateError;

const BY_CODE: Record<number, ErrorClass> = {
  [ErrorCode.INVALID_ARGUMENT]: InvalidArgument,
  [ErrorCode.NOT_FOUND]: NotFound,
  [ErrorCode.ALREADY_EXISTS]: AlreadyExists,
  [ErrorCode.FAILED_PRECONDITION]: FailedPrecondition,
  [ErrorCode.RESOURCE_EXHAUSTED]: ResourceExhausted,
  [ErrorCode.UNAVAILABLE]: Unavailable,
  [ErrorCode.INTERNAL]: Internal,
  [ErrorCode.UNAUTHENTICATED]: Unauthenticated,
  [ErrorCode.PERMISSION_DENIED]: PermissionDenied,
  [ErrorCode.OUTCOME_UNKNOWN]: OutcomeUnknown,
};

// The inverse of the node's mapping (messages/errs). CANCELLED is a call this
// side ended; the node's only CANCELLED is a shutdown's, which stored nothing.
const BY_GRPC: Partial<Record<Code, ErrorClass>> = {
  [Code.InvalidArgument]: InvalidArgument,
  [Code.OutOfRange]: InvalidArgument,
  [Code.NotFound]: NotFound,
  [Code.AlreadyExists]: AlreadyExists,
  [Code.FailedPrecondition]: FailedPrecondition,
  [Code.ResourceExhausted]: ResourceExhausted,
  [Code.Unavailable]: Unavailable,
  [Code.Canceled]: Unavailable,
  [Code.DeadlineExceeded]: OutcomeUnknown,
  [Code.Unauthenticated]: Unauthenticated,
  [Code.PermissionDenied]: PermissionDenied,
};

// How the node words a refused conditional write, which is all an append
// stream's outcome carries of it (the status detail is for unary calls).
const MISMATCH_RE = /expected next sequence (-?\d+), but the next sequence is (-?\d+)/;

/** The error class of an agentstate code (Internal for codes this client does not know). */
export function errorClass(code: ErrorCode): ErrorClass {
  return BY_CODE[code] ?? Internal;
}

/** The error for an agentstate.common.v1.Error value (a batched append's outcome; it carries no gRPC status). */
export function fromProto(err: ErrorProto): AgentStateError {
  if (err.code === ErrorCode.FAILED_PRECONDITION) {
    const m = MISMATCH_RE.exec(err.message);
    if (m) return new SequenceMismatch(err.message, BigInt(m[1]), BigInt(m[2]));
  }
  return new (errorClass(err.code))(err.message);
}

/** The error for anything a call threw: the node's code from the status details if present, else the gRPC code's. */
export function fromError(e: unknown): AgentStateError {
  if (e instanceof AgentStateError) return e;
  const ce = ConnectError.from(e);
  let detail: ErrorProto | undefined;
  try {
    detail = ce.findDetails(ErrorSchema)[0];
  } catch {
    detail = undefined; // a malformed detail is no detail
  }
  const opts = { grpcCode: ce.code, metadata: ce.metadata, details: ce.details, cause: e };
  if (detail !== undefined) {
    const message = detail.message || ce.rawMessage;
    if (detail.code === ErrorCode.FAILED_PRECONDITION) {
      const mm = ce.findDetails(SequenceMismatchSchema)[0];
      if (mm !== undefined) {
        return new SequenceMismatch(message, mm.expectedNextSequence, mm.nextSequence, { ...opts, codeFromDetails: true });
      }
    }
    return new (errorClass(detail.code))(message, { ...opts, codeFromDetails: true });
  }
  if (ce.code === Code.Internal && systemError(ce.cause)) {
    // Connect calls a failed connection (a certificate that does not
    // verify, a reset socket) INTERNAL; it is the transport's UNAVAILABLE,
    // as gRPC's own libraries say.
    return new Unavailable(`connection failed: ${ce.rawMessage}`, opts);
  }
  const cls = BY_GRPC[ce.code] ?? Internal;
  return new cls(ce.rawMessage || Code[ce.code], opts);
}

// Whether e is an error of Node's sockets or TLS: they carry a string code
// (ECONNRESET, UNABLE_TO_VERIFY_LEAF_SIGNATURE), and a status that came over
// the wire has no such cause.
function systemError(e: unknown): boolean {
  return e instanceof Error && typeof (e as { code?: unknown }).code === "string";
}

/**
 * What a failed write means to its caller. The node's own UNAVAILABLE
 * carries its detail and promises nothing was stored; one without it is the
 * transport's (the connection broke, maybe after the request was sent and
 * applied), so for a write it is OutcomeUnknown. Reads keep Unavailable.
 */
export function forWrite(err: AgentStateError): AgentStateError {
  if (err instanceof Unavailable && !err.codeFromDetails) {
    return new OutcomeUnknown(`the connection failed and the request may have been applied: ${err.message}`, {
      grpcCode: err.code,
      metadata: err.metadata,
      details: err.details,
      cause: err,
    });
  }
  return err;
}
