// netcode.js: browser client for the netcode WebSocket relay (package
// github.com/gonetcode/netcode/bridge). A dependency-free ES module.
//
//   import { connect, NetcodeError } from "./netcode.js";
//   const token = new Uint8Array(await (await fetch("/token")).arrayBuffer());
//   const session = await connect("wss://example.com/relay", token);
//   session.onmessage = (payload) => { /* a Uint8Array, one netcode payload */ };
//   session.onclose = (err) => { /* a NetcodeError: err.code, err.name, err.reason */ };
//   session.send(new TextEncoder().encode("hello"));
//   session.close();

/** The WebSocket subprotocol of the relay. */
export const SUBPROTOCOL = "netcode.relay.v1";

/** Size of a connect token. */
export const CONNECT_TOKEN_BYTES = 2048;

/** Largest payload one send may carry. */
export const MAX_PAYLOAD_BYTES = 1200;

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
 * example "netcode: connection denied").
 */
export class NetcodeError extends Error {
  constructor(code, reason) {
    const name = CLOSE_CODES[code] || "Error";
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

  /** @internal */
  constructor(ws, clientIndex, maxClients) {
    this.#ws = ws;
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

  /**
   * Sends one payload (Uint8Array, ArrayBuffer or a typed-array view) of 1
   * to 1200 bytes. Throws RangeError for other sizes and NetcodeError once
   * the session has ended.
   */
  send(bytes) {
    const view = toBytes(bytes);
    if (view.byteLength < 1 || view.byteLength > MAX_PAYLOAD_BYTES) {
      throw new RangeError(`netcode: payload must be 1..${MAX_PAYLOAD_BYTES} bytes, got ${view.byteLength}`);
    }
    if (!this.open) throw new NetcodeError(1000, "session closed");
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
 */
export function connect(url, token) {
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
    const ws = new WebSocket(wsURL(url), SUBPROTOCOL);
    ws.binaryType = "arraybuffer";
    let session = null;
    ws.onopen = () => ws.send(tokenBytes);
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        let msg;
        try { msg = JSON.parse(ev.data); } catch { return; }
        if (msg && msg.type === "connected" && session === null) {
          session = new Session(ws, msg.clientIndex, msg.maxClients);
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
