// netcode.js: browser client for the netcode WebSocket relay (package
// github.com/gonetcode/netcode/bridge). A dependency-free ES module.
//
//   import { connect, NetcodeError, BACKPRESSURE } from "./netcode.js";
//   // A token endpoint (package backend) answers POST, with the player's
//   // credentials, with the 2048-byte connect token.
//   const res = await fetch("/token", { method: "POST", headers: { Authorization: `Bearer ${secret}` } });
//   if (!res.ok) throw new Error(`token: HTTP ${res.status}`);
//   const token = new Uint8Array(await res.arrayBuffer());
//   const session = await connect("wss://example.com/relay", token);
//   session.onmessage = (payload) => { /* a Uint8Array, one netcode payload */ };
//   session.onclose = (err) => { /* a NetcodeError: err.code, err.name, err.reason */ };
//   try {
//     session.send(new TextEncoder().encode("hello"));
//   } catch (err) {
//     if (err.code !== BACKPRESSURE) throw err;
//     // Too much is waiting to go out: this payload was not sent.
//   }
//   session.close();
//
// Backpressure: the browser queues what send passes to the WebSocket
// without limit, so send refuses a payload that would take the bytes
// waiting to be sent (WebSocket.bufferedAmount) past a bound,
// options.maxBufferedAmount of connect (default 1 MiB,
// DEFAULT_MAX_BUFFERED_AMOUNT). It then throws a NetcodeError whose code is
// BACKPRESSURE ("backpressure") and whose name is "Backpressure"; the
// payload is not sent and the session stays open, so the caller can drop
// it (netcode payloads are unreliable anyway) or try again later.
// session.bufferedAmount tells how much is waiting.

/** The WebSocket subprotocol of the relay. */
export const SUBPROTOCOL = "netcode.relay.v1";

/** Size of a connect token. */
export const CONNECT_TOKEN_BYTES = 2048;

/** Largest payload one send may carry. */
export const MAX_PAYLOAD_BYTES = 1200;

/** Default of connect's options.maxBufferedAmount, in bytes (1 MiB). */
export const DEFAULT_MAX_BUFFERED_AMOUNT = 1048576;

/**
 * The code of the NetcodeError send throws when the payload would take the
 * bytes waiting to be sent past options.maxBufferedAmount. It is not a
 * close code: the session stays open.
 */
export const BACKPRESSURE = "backpressure";

/**
 * Close codes of the relay and their names. 4000-4999 are the bridge's own
 * (the bridge package's Code constants); the others are WebSocket's.
 */
export const CLOSE_CODES = Object.freeze({
  1000: "Closed",
  1001: "GoingAway",
  1003: "UnsupportedData",
  1006: "ConnectionLost",
  1008: "PolicyViolation",
  1009: "MessageTooBig",
  1011: "InternalError",
  1013: "TryAgainLater",
  4000: "Disconnected",
  4001: "ConnectionDenied",
  4002: "ConnectTokenExpired",
  4003: "InvalidConnectToken",
  4004: "ConnectionRequestTimedOut",
  4005: "ConnectionResponseTimedOut",
  4006: "ConnectionTimedOut",
  4010: "ServerNotAllowed",
  4011: "HandshakeTimeout",
  4012: "IdleTimeout",
});

/**
 * Why a session failed or ended: code is the WebSocket close code, name its
 * entry in CLOSE_CODES ("Error" if unknown), reason the bridge's text (for
 * example "netcode: connection denied"). Thrown by send with code
 * BACKPRESSURE and name "Backpressure", it means only that this payload was
 * not sent.
 */
export class NetcodeError extends Error {
  constructor(code, reason) {
    const name = code === BACKPRESSURE ? "Backpressure" : CLOSE_CODES[code] || "Error";
    super(reason ? `${name} (${code}): ${reason}` : `${name} (${code})`);
    this.name = name;
    this.code = code;
    this.reason = reason || "";
  }
}

const MAX_QUEUED = 256;

/** A connected relay session; made by connect. */
export class Session {
  #ws;
  #onmessage = null;
  #queue = [];
  #closed = false;
  #maxBuffered;

  /** @internal */
  constructor(ws, clientIndex, maxClients, maxBuffered) {
    this.#ws = ws;
    this.#maxBuffered = maxBuffered;
    /** The client's slot on the server. */
    this.clientIndex = clientIndex;
    /** The server's number of slots. */
    this.maxClients = maxClients;
    /** Called once with a NetcodeError when the session ends. */
    this.onclose = null;
    /** A promise of the NetcodeError the session ends with. */
    this.closed = new Promise((resolve) => { this._resolveClosed = resolve; });
  }

  /**
   * Called with each payload from the server, a Uint8Array. Payloads that
   * arrive before it is set are kept (up to 256) and delivered when it is.
   */
  get onmessage() { return this.#onmessage; }
  set onmessage(fn) {
    this.#onmessage = fn;
    while (fn && this.#queue.length > 0) fn(this.#queue.shift());
  }

  /** True until the session ends. */
  get open() { return !this.#closed && this.#ws.readyState === WebSocket.OPEN; }

  /** Bytes passed to send that the browser has not sent yet. */
  get bufferedAmount() { return this.#ws.bufferedAmount; }

  /** The bound on bufferedAmount that send keeps (options.maxBufferedAmount). */
  get maxBufferedAmount() { return this.#maxBuffered; }

  /**
   * Sends one payload (Uint8Array, ArrayBuffer or a typed-array view) of 1
   * to 1200 bytes. Throws RangeError for other sizes, NetcodeError once the
   * session has ended, and NetcodeError with code BACKPRESSURE (name
   * "Backpressure") if bufferedAmount plus the payload would exceed
   * maxBufferedAmount; then nothing is sent and the session stays open.
   */
  send(bytes) {
    const view = toBytes(bytes);
    if (view.byteLength < 1 || view.byteLength > MAX_PAYLOAD_BYTES) {
      throw new RangeError(`netcode: payload must be 1..${MAX_PAYLOAD_BYTES} bytes, got ${view.byteLength}`);
    }
    if (!this.open) throw new NetcodeError(1000, "session closed");
    const buffered = this.#ws.bufferedAmount;
    if (buffered + view.byteLength > this.#maxBuffered) {
      throw new NetcodeError(BACKPRESSURE,
        `${buffered} bytes waiting to be sent, limit ${this.#maxBuffered}: payload not sent`);
    }
    this.#ws.send(view);
  }

  /** Ends the session; the bridge disconnects from the server cleanly. */
  close() {
    if (this.#ws.readyState === WebSocket.CONNECTING || this.#ws.readyState === WebSocket.OPEN) {
      this.#ws.close(1000);
    }
  }

  /** @internal */
  _deliver(data) {
    const payload = new Uint8Array(data);
    if (this.#onmessage) {
      this.#onmessage(payload);
    } else if (this.#queue.length < MAX_QUEUED) {
      this.#queue.push(payload);
    }
  }

  /** @internal */
  _end(err) {
    if (this.#closed) return;
    this.#closed = true;
    this._resolveClosed(err);
    if (this.onclose) this.onclose(err);
  }
}

function toBytes(b) {
  if (b instanceof Uint8Array) return b;
  if (b instanceof ArrayBuffer) return new Uint8Array(b);
  if (ArrayBuffer.isView(b)) return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  throw new TypeError("netcode: expected a Uint8Array, an ArrayBuffer or a typed array");
}

/**
 * Opens a relay session: url is the bridge's ws:// or wss:// address (a
 * path relative to the page, such as "/relay", is resolved against it),
 * token the 2048-byte connect token from your backend. Resolves with a
 * Session once the bridge is connected to a server; rejects with a
 * NetcodeError saying why not.
 *
 * options (optional): maxBufferedAmount, the most bytes that may wait in
 * the browser to be sent before send throws a NetcodeError with code
 * BACKPRESSURE; at least MAX_PAYLOAD_BYTES, Infinity for no bound, default
 * DEFAULT_MAX_BUFFERED_AMOUNT (1 MiB). A bad option rejects with a
 * RangeError.
 */
export function connect(url, token, options = {}) {
  return new Promise((resolve, reject) => {
    let tokenBytes;
    try {
      tokenBytes = toBytes(token);
    } catch (e) {
      reject(e);
      return;
    }
    if (tokenBytes.byteLength !== CONNECT_TOKEN_BYTES) {
      reject(new RangeError(`netcode: connect token must be ${CONNECT_TOKEN_BYTES} bytes, got ${tokenBytes.byteLength}`));
      return;
    }
    const maxBuffered = options?.maxBufferedAmount ?? DEFAULT_MAX_BUFFERED_AMOUNT;
    if (typeof maxBuffered !== "number" || !(maxBuffered >= MAX_PAYLOAD_BYTES)) {
      reject(new RangeError(`netcode: options.maxBufferedAmount must be a number of at least ${MAX_PAYLOAD_BYTES} bytes, got ${maxBuffered}`));
      return;
    }
    const ws = new WebSocket(wsURL(url), SUBPROTOCOL);
    ws.binaryType = "arraybuffer";
    let session = null;
    ws.onopen = () => ws.send(tokenBytes);
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        let msg;
        try { msg = JSON.parse(ev.data); } catch { return; }
        if (msg && msg.type === "connected" && session === null) {
          session = new Session(ws, msg.clientIndex, msg.maxClients, maxBuffered);
          resolve(session);
        }
        return;
      }
      if (session !== null) session._deliver(ev.data);
    };
    ws.onclose = (ev) => {
      const err = new NetcodeError(ev.code, ev.reason);
      if (session === null) reject(err);
      else session._end(err);
    };
  });
}

function wsURL(url) {
  const u = new URL(url, globalThis.location ? globalThis.location.href : undefined);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  return u.href;
}
