// netcode.js: browser client for the netcode relay (package
// github.com/gonetcode/netcode/bridge), over WebTransport where the browser
// and the bridge have it, else over WebSocket. A dependency-free ES module.
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
// WebTransport: give connect the bridge's WebTransport endpoint and the
// session carries payloads in datagrams, so that a lost packet delays
// nothing behind it, where the browser has WebTransport; elsewhere, or if
// the endpoint does not answer, it falls back to the WebSocket url.
// session.transport says which ("webtransport" or "websocket"),
// session.fallback why not WebTransport.
//
//   const session = await connect("wss://example.com/relay", token, {
//     webTransport: "https://example.com:443/relay",
//   });
//
// A bridge with a development certificate (package bridge/webtransport)
// serves its URLs and the certificate hashes to pin at an info endpoint:
//
//   const wt = await webTransportInfo("/webtransport"); // null if none
//   const session = await connect("/relay", token, { webTransport: wt?.relay });
//
// A datagram is bounded by the path: session.maxPayloadBytes (at most
// 1200) is the largest payload send takes, and send throws a RangeError
// naming the limit above it, never letting the browser drop it unsaid.
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

/** Default of connect's options.webTransportTimeout, in milliseconds. */
export const DEFAULT_WEBTRANSPORT_TIMEOUT = 5000;

/** The values of Session.transport. */
export const WEBSOCKET = "websocket";
export const WEBTRANSPORT = "webtransport";

/** A connected relay session; made by connect. */
export class Session {
  #link;
  #onmessage = null;
  #queue = [];
  #closed = false;
  #maxBuffered;

  /** @internal */
  constructor(link, hello, maxBuffered, fallback) {
    this.#link = link;
    this.#maxBuffered = maxBuffered;
    /** The client's slot on the server. */
    this.clientIndex = hello.clientIndex;
    /** The server's number of slots. */
    this.maxClients = hello.maxClients;
    /**
     * What carries the session: WEBTRANSPORT ("webtransport": payloads in
     * datagrams, unordered, a lost one holds nothing back) or WEBSOCKET
     * ("websocket": one TCP stream).
     */
    this.transport = link.kind;
    /**
     * Why WebTransport is not used, when connect was given a WebTransport
     * endpoint but the session runs over WebSocket: an Error (the
     * browser has no WebTransport, or the endpoint did not answer in
     * time, or the handshake failed). null otherwise.
     */
    this.fallback = fallback;
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
  get open() { return !this.#closed && this.#link.open; }

  /** Bytes passed to send that the browser has not sent yet. */
  get bufferedAmount() { return this.#link.bufferedAmount; }

  /** The bound on bufferedAmount that send keeps (options.maxBufferedAmount). */
  get maxBufferedAmount() { return this.#maxBuffered; }

  /**
   * The largest payload send takes: MAX_PAYLOAD_BYTES, or less over
   * WebTransport when the session's datagrams are smaller
   * (datagrams.maxDatagramSize, which the browser sets from the path).
   */
  get maxPayloadBytes() { return Math.min(MAX_PAYLOAD_BYTES, this.#link.maxPayload); }

  /**
   * Sends one payload (Uint8Array, ArrayBuffer or a typed-array view) of 1
   * to maxPayloadBytes bytes. Throws RangeError for other sizes (over
   * WebTransport, naming the datagram limit: a larger payload would be
   * dropped by the browser without a word), NetcodeError once the session
   * has ended, and NetcodeError with code BACKPRESSURE (name
   * "Backpressure") if bufferedAmount plus the payload would exceed
   * maxBufferedAmount; then nothing is sent and the session stays open.
   */
  send(bytes) {
    const view = toBytes(bytes);
    const max = this.maxPayloadBytes;
    if (view.byteLength < 1 || view.byteLength > max) {
      const why = max < MAX_PAYLOAD_BYTES
        ? ` (this WebTransport session's datagrams carry at most ${this.#link.maxPayload} bytes of payload)` : "";
      throw new RangeError(`netcode: payload must be 1..${max} bytes, got ${view.byteLength}${why}`);
    }
    if (!this.open) throw new NetcodeError(1000, "session closed");
    const buffered = this.#link.bufferedAmount;
    if (buffered + view.byteLength > this.#maxBuffered) {
      throw new NetcodeError(BACKPRESSURE,
        `${buffered} bytes waiting to be sent, limit ${this.#maxBuffered}: payload not sent`);
    }
    this.#link.send(view);
  }

  /** Ends the session; the bridge disconnects from the server cleanly. */
  close() { this.#link.close(); }

  /** @internal */
  _deliver(data) {
    const payload = data instanceof Uint8Array ? data : new Uint8Array(data);
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
 * options (optional):
 * - maxBufferedAmount: the most bytes that may wait in the browser to be
 *   sent before send throws a NetcodeError with code BACKPRESSURE; at
 *   least MAX_PAYLOAD_BYTES, Infinity for no bound, default
 *   DEFAULT_MAX_BUFFERED_AMOUNT (1 MiB).
 * - webTransport: the bridge's WebTransport endpoint, an https:// URL with
 *   its port, or an object { url, serverCertificateHashes } where
 *   serverCertificateHashes is WebTransport's option (a development
 *   bridge's self-signed certificate, pinned by its SHA-256). With it the
 *   session runs over WebTransport where the browser has it, and falls
 *   back to WebSocket (url) where it does not, or when the endpoint does
 *   not answer within webTransportTimeout or its handshake fails; see
 *   Session.transport and Session.fallback. A refusal by the bridge (a
 *   NetcodeError: a bad token, a full bridge) is not a reason to fall back:
 *   connect rejects with it.
 * - transport: "auto" (the default: as above), WEBTRANSPORT (only
 *   WebTransport: reject rather than fall back) or WEBSOCKET (only
 *   WebSocket, even with webTransport).
 * - webTransportTimeout: how long, in ms, to wait for the WebTransport
 *   endpoint before falling back; default DEFAULT_WEBTRANSPORT_TIMEOUT.
 *
 * A bad option rejects with a RangeError.
 */
export async function connect(url, token, options = {}) {
  const tokenBytes = toBytes(token);
  if (tokenBytes.byteLength !== CONNECT_TOKEN_BYTES) {
    throw new RangeError(`netcode: connect token must be ${CONNECT_TOKEN_BYTES} bytes, got ${tokenBytes.byteLength}`);
  }
  const maxBuffered = options?.maxBufferedAmount ?? DEFAULT_MAX_BUFFERED_AMOUNT;
  if (typeof maxBuffered !== "number" || !(maxBuffered >= MAX_PAYLOAD_BYTES)) {
    throw new RangeError(`netcode: options.maxBufferedAmount must be a number of at least ${MAX_PAYLOAD_BYTES} bytes, got ${maxBuffered}`);
  }
  const mode = options?.transport ?? "auto";
  if (mode !== "auto" && mode !== WEBTRANSPORT && mode !== WEBSOCKET) {
    throw new RangeError(`netcode: options.transport must be "auto", "${WEBTRANSPORT}" or "${WEBSOCKET}", got ${mode}`);
  }
  const timeout = options?.webTransportTimeout ?? DEFAULT_WEBTRANSPORT_TIMEOUT;
  if (typeof timeout !== "number" || !(timeout > 0)) {
    throw new RangeError(`netcode: options.webTransportTimeout must be a positive number of milliseconds, got ${timeout}`);
  }
  let wt = options?.webTransport ?? null;
  if (typeof wt === "string") wt = { url: wt };
  if (wt !== null && (typeof wt !== "object" || typeof wt.url !== "string")) {
    throw new RangeError("netcode: options.webTransport must be a URL or { url, serverCertificateHashes }");
  }
  if (mode === WEBTRANSPORT && wt === null) {
    throw new RangeError(`netcode: options.transport is "${WEBTRANSPORT}" but options.webTransport is not set`);
  }

  let fallback = null;
  if (wt !== null && mode !== WEBSOCKET) {
    if (typeof WebTransport !== "function") {
      fallback = new Error("netcode: this browser has no WebTransport");
    } else {
      try {
        return await connectWebTransport(wt, tokenBytes, maxBuffered, timeout);
      } catch (e) {
        // A refusal says the bridge will not have this session, whatever
        // carries it: no fallback.
        if (e instanceof NetcodeError) throw e;
        fallback = e;
      }
    }
    if (mode === WEBTRANSPORT) throw fallback;
  }
  return connectWebSocket(url, tokenBytes, maxBuffered, fallback);
}

/**
 * Fetches a WebTransport bridge's info (package bridge/webtransport's
 * Server.InfoHandler, JSON { relay, transport, serverCertificateHashes })
 * from url and returns { relay, transport }, each null or a value for
 * connect's options.webTransport: { url, serverCertificateHashes } with
 * the hashes decoded for the WebTransport constructor. Resolves with null
 * if the browser has no WebTransport or the endpoint does not answer with
 * the info, so that connect runs over WebSocket.
 */
export async function webTransportInfo(url) {
  if (typeof WebTransport !== "function") return null;
  let info, hashes;
  try {
    const res = await fetch(url, { cache: "no-store" });
    if (!res.ok) return null;
    info = await res.json();
    hashes = (info.serverCertificateHashes ?? []).map((h) => ({
      algorithm: h.algorithm,
      value: Uint8Array.from(atob(h.value), (c) => c.charCodeAt(0)),
    }));
  } catch {
    return null; // no answer, or not the info
  }
  const endpoint = (u) => (typeof u === "string" && u !== ""
    ? (hashes.length > 0 ? { url: u, serverCertificateHashes: hashes } : { url: u }) : null);
  return { relay: endpoint(info.relay), transport: endpoint(info.transport) };
}

function connectWebSocket(url, tokenBytes, maxBuffered, fallback) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(wsURL(url), SUBPROTOCOL);
    ws.binaryType = "arraybuffer";
    const link = {
      kind: WEBSOCKET,
      maxPayload: MAX_PAYLOAD_BYTES,
      get open() { return ws.readyState === WebSocket.OPEN; },
      get bufferedAmount() { return ws.bufferedAmount; },
      send(view) { ws.send(view); },
      close() {
        if (ws.readyState === WebSocket.CONNECTING || ws.readyState === WebSocket.OPEN) ws.close(1000);
      },
    };
    let session = null;
    ws.onopen = () => ws.send(tokenBytes);
    ws.onmessage = (ev) => {
      if (typeof ev.data === "string") {
        const msg = parseConnected(ev.data);
        if (msg !== null && session === null) {
          session = new Session(link, msg, maxBuffered, fallback);
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

function parseConnected(text) {
  let msg;
  try { msg = JSON.parse(text); } catch { return null; }
  return msg && msg.type === "connected" ? msg : null;
}

// connectWebTransport opens a relay session over WebTransport: the token
// goes on a bidirectional stream, which brings back the "connected"
// message and, when the bridge ends the session, its close code and
// reason; payloads travel as datagrams. It rejects with a NetcodeError
// when the bridge refuses the session, and with another Error when the
// endpoint cannot be reached (connect then falls back to WebSocket).
async function connectWebTransport(wt, tokenBytes, maxBuffered, timeout) {
  const options = { requireUnreliable: true };
  if (wt.serverCertificateHashes) options.serverCertificateHashes = wt.serverCertificateHashes;
  const transport = new WebTransport(wt.url, options); // throws a TypeError (SyntaxError) for a bad URL
  transport.closed.catch(() => {}); // observed below
  let timer;
  try {
    await Promise.race([
      transport.ready,
      new Promise((_, reject) => {
        timer = setTimeout(() => reject(new Error(`netcode: WebTransport endpoint ${wt.url} did not answer within ${timeout} ms`)), timeout);
      }),
    ]);
  } catch (e) {
    try { transport.close(); } catch { /* already failed */ }
    throw e instanceof Error ? e : new Error(String(e));
  } finally {
    clearTimeout(timer);
  }
  return runWebTransport(transport, tokenBytes, maxBuffered);
}

async function runWebTransport(transport, tokenBytes, maxBuffered) {
  // Everything below is past the handshake: a failure is the bridge's
  // word (or a lost connection), reported as a NetcodeError.
  let closeInfo = null; // { code, reason }: the bridge's, or the page's own close
  let buffered = 0;
  let ended = false;
  const writer = transport.datagrams.writable.getWriter();
  const link = {
    kind: WEBTRANSPORT,
    get maxPayload() { return transport.datagrams.maxDatagramSize; },
    get open() { return !ended; },
    get bufferedAmount() { return buffered; },
    send(view) {
      const copy = view.slice(); // the caller may reuse its buffer at once
      buffered += copy.byteLength;
      const done = () => { buffered -= copy.byteLength; };
      writer.write(copy).then(done, done);
    },
    close() {
      if (ended) return;
      closeInfo ??= { code: 1000, reason: "" };
      try { transport.close({ closeCode: 1000, reason: "" }); } catch { /* already closed */ }
    },
  };
  // The bridge says why it ends a session in a message on a stream of its
  // own ({"type":"closed","code":...,"reason":...}), as browsers do not
  // reliably see the code of the session's close; the page then closes the
  // session itself, with that code.
  (async () => {
    try {
      for await (const stream of transport.incomingUnidirectionalStreams) {
        for await (const m of readMessages(stream)) {
          if (m.type === "closed" && typeof m.code === "number") {
            closeInfo ??= { code: m.code, reason: String(m.reason ?? "") };
            try { transport.close({ closeCode: m.code, reason: String(m.reason ?? "").slice(0, 1024) }); } catch { /* closed */ }
          }
        }
      }
    } catch { /* the session ended */ }
  })();
  const ending = transport.closed.then(
    (ci) => closeInfo ?? { code: ci.closeCode || 1000, reason: ci.reason },
    () => closeInfo ?? { code: 1006, reason: "WebTransport session lost" },
  );

  let hello = null;
  try {
    const stream = await transport.createBidirectionalStream();
    const w = stream.writable.getWriter();
    await w.write(tokenBytes);
    await w.close();
    for await (const m of readMessages(stream.readable)) {
      if (m.type === "connected") hello = m;
    }
  } catch { /* the session ended: ending says why */ }
  if (hello === null) {
    try { transport.close(); } catch { /* closed */ }
    const c = await ending;
    throw new NetcodeError(c.code, c.reason);
  }
  const session = new Session(link, hello, maxBuffered, null);
  (async () => {
    const reader = transport.datagrams.readable.getReader();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        session._deliver(value);
      }
    } catch { /* the session ended */ }
  })();
  ending.then((c) => {
    ended = true;
    session._end(new NetcodeError(c.code, c.reason));
  });
  return session;
}

// readMessages yields the JSON messages of a stream, one a line.
async function* readMessages(readable) {
  const decoder = new TextDecoder();
  let text = "";
  for await (const chunk of readable) {
    text += decoder.decode(chunk, { stream: true });
    if (text.length > 65536) throw new Error("netcode: control message too long");
    let nl;
    while ((nl = text.indexOf("\n")) >= 0) {
      const line = text.slice(0, nl);
      text = text.slice(nl + 1);
      let m;
      try { m = JSON.parse(line); } catch { continue; }
      if (m && typeof m === "object") yield m;
    }
  }
  if (text.trim() !== "") {
    let m = null;
    try { m = JSON.parse(text); } catch { /* not a message */ }
    if (m && typeof m === "object") yield m;
  }
}

function wsURL(url) {
  const u = new URL(url, globalThis.location ? globalThis.location.href : undefined);
  if (u.protocol === "http:") u.protocol = "ws:";
  else if (u.protocol === "https:") u.protocol = "wss:";
  return u.href;
}
