#!/usr/bin/env node
// node_echo — a hookwire extension written in Node.js straight against proto/, without the Python SDK.
//
// It is the proof that the extension contract is language-neutral. It follows the process contract:
//   * binds the Unix socket named by HOOKWIRE_SOCKET and prints exactly one handshake line on stdout,
//     `hookwire|1|unix:<path>`;
//   * rejects every Extension call that lacks `x-hookwire-token: <HOOKWIRE_TOKEN>` (UNAUTHENTICATED);
//   * exits when its stdin (the host's lifeline pipe) reaches EOF, or after a Shutdown call;
//   * logs to stderr only.
// It serves Describe (no "connect" feature, so the host uses the unary RPCs), a tool `echo`, a
// beforeTurn hook that appends to the system prompt, the observation RPCs (AfterToolCall, OnStepFinish,
// OnChunk, Observe) which it counts, a tool `observed` reporting those counts, a tool `fetch` (an http:// GET
// through the egress proxy named by HTTP_PROXY, for a manifest whose network lists hosts), a tool `trace` reporting
// the W3C trace context of its call and of the last beforeTurn (CallContext.traceparent, and the `traceparent`
// gRPC metadata the host sends on unary calls), and Shutdown. Each traced call logs its traceparent on stderr.
// The grpc.health.v1 service is not served: grpc-js does not ship it (the host then relies on the
// handshake and the process watcher).
"use strict";

const fs = require("fs");
const path = require("path");
const http = require("http");
const grpc = require("@grpc/grpc-js");
const protoLoader = require("@grpc/proto-loader");

const NAME = "node_echo";
const VERSION = "1.0.0";
const PROTOCOL_VERSION = "1";
const HANDSHAKE_MAGIC = "hookwire";
const TOKEN_METADATA_KEY = "x-hookwire-token";
const MAGIC_COOKIE = "hookwire-extension-v1";
const SYSTEM_ADDITION = "(node_echo: this turn passed through a Node.js extension.)";

// proto/ lives at the repository root, two levels above this script; an installed hookwire-sdk carries the same
// files in extension_sdk/proto/ (beside sample_extensions/ in site-packages).
const PROTO_ROOT = [
  path.resolve(__dirname, "..", "..", "proto"),
  path.resolve(__dirname, "..", "..", "extension_sdk", "proto"),
].find((dir) => fs.existsSync(path.join(dir, "hookwire", "v1", "extension.proto")))
  || path.resolve(__dirname, "..", "..", "proto");
const PROTO_FILE = path.join(PROTO_ROOT, "hookwire", "v1", "extension.proto");

function log(message) {
  process.stderr.write(`[${NAME}] ${message}\n`);
}

function socketPath() {
  const argv = process.argv.slice(2);
  const flag = argv.indexOf("--socket");
  if (flag !== -1 && argv[flag + 1]) return path.resolve(argv[flag + 1]);
  if (process.env.HOOKWIRE_MAGIC_COOKIE !== MAGIC_COOKIE) {
    process.stderr.write(
      "This is a hookwire extension; load its manifest from a hookwire host " +
        "(e.g. `hookwire run sample_extensions/node_echo/manifest.yaml`).\n",
    );
    process.exit(1);
  }
  const socket = process.env.HOOKWIRE_SOCKET;
  if (!socket) {
    process.stderr.write("HOOKWIRE_SOCKET is not set: the host must name the socket to bind\n");
    process.exit(1);
  }
  return socket;
}

const SOCKET = socketPath();
const TOKEN = process.env.HOOKWIRE_TOKEN || "";
// Started by hand with --socket and no token (debugging): accept calls without one, loudly.
const OPEN_ACCESS = TOKEN === "" && process.env.HOOKWIRE_MAGIC_COOKIE !== MAGIC_COOKIE;
if (OPEN_ACCESS) log("no HOOKWIRE_TOKEN: accepting unauthenticated calls (debug mode via --socket)");

const packageDefinition = protoLoader.loadSync(PROTO_FILE, {
  keepCase: false, // fields as camelCase: tool_call_id -> toolCallId
  longs: Number,
  enums: String,
  defaults: false, // absent optional fields stay undefined ("not set" differs from zero)
  oneofs: true,
  includeDirs: [PROTO_ROOT],
});
const hookwire = grpc.loadPackageDefinition(packageDefinition).hookwire.v1;

const observed = { afterToolCall: 0, onStepFinish: 0, onChunk: 0, beforeToolCall: 0, batches: 0 };

// -- trace context ----------------------------------------------------------------------------
// The host's span for a call rides in its CallContext (traceparent, tracestate) and, on these unary calls, in the
// gRPC metadata too (what OpenTelemetry's gRPC instrumentation reads). An extension with an OpenTelemetry SDK would
// start its spans as children of it; this one shows it: on stderr, and through the `trace` tool.
let lastBeforeTurnTrace = null;

function traceOf(request, call) {
  const context = (request && request.context) || {};
  const fromMetadata = call ? call.metadata.get("traceparent") : [];
  return {
    traceparent: context.traceparent || "",
    tracestate: context.tracestate || "",
    metadataTraceparent: fromMetadata.length ? String(fromMetadata[0]) : "",
  };
}

function logTrace(what, trace) {
  if (trace.traceparent) log(`${what} traceparent=${trace.traceparent}`);
}

// -- authentication ---------------------------------------------------------------------------

function authorized(call) {
  if (OPEN_ACCESS) return true;
  const values = call.metadata.get(TOKEN_METADATA_KEY);
  return TOKEN !== "" && values.length === 1 && String(values[0]) === TOKEN;
}

const UNAUTHENTICATED = {
  code: grpc.status.UNAUTHENTICATED,
  details: `${NAME}: missing or wrong ${TOKEN_METADATA_KEY} metadata`,
};

// Wrap a unary handler with the token check and error reporting.
function unary(handler) {
  return (call, callback) => {
    if (!authorized(call)) return callback(UNAUTHENTICATED);
    try {
      callback(null, handler(call.request, call));
    } catch (err) {
      log(`handler error: ${err && err.stack ? err.stack : err}`);
      callback({ code: grpc.status.INTERNAL, details: `${NAME}: ${err && err.message ? err.message : err}` });
    }
  };
}

function hookError(hook, err) {
  return { hook, name: err.name || "Error", message: String(err.message || err), stack: String(err.stack || "") };
}

// -- tools ------------------------------------------------------------------------------------

const TOOLS = [
  {
    name: "echo",
    description: "Echoes the text back reversed, prefixed with 'node:' (proof it ran in Node.js)",
    inputSchemaJson: JSON.stringify({
      type: "object",
      properties: { text: { type: "string", description: "The text to echo" } },
      required: ["text"],
      additionalProperties: false,
    }),
    streaming: false,
  },
  {
    name: "observed",
    description: "How many observation events (afterToolCall, onStepFinish, onChunk) this extension has received",
    inputSchemaJson: JSON.stringify({ type: "object", properties: {}, additionalProperties: false }),
    streaming: false,
  },
  {
    name: "fetch",
    description: "GET an http:// URL through the egress proxy named by HTTP_PROXY; '<status> <body>'",
    inputSchemaJson: JSON.stringify({
      type: "object",
      properties: { url: { type: "string", description: "An http:// URL the manifest's network list allows" } },
      required: ["url"],
      additionalProperties: false,
    }),
    streaming: false,
  },
  {
    name: "trace",
    description: "The W3C trace context of this call and of the last beforeTurn (what the host sent)",
    inputSchemaJson: JSON.stringify({ type: "object", properties: {}, additionalProperties: false }),
    streaming: false,
  },
];

// Node 20's fetch ignores HTTP(S)_PROXY (and undici's ProxyAgent is an extra npm package), so this uses the
// http module the way a proxy expects: an absolute-URI request to the proxy. Inside the sandbox there is no
// other way out: the network namespace is empty but for the relay at HTTP_PROXY.
function proxiedGet(url) {
  const proxyUrl = process.env.HTTP_PROXY || process.env.http_proxy;
  if (!proxyUrl) return Promise.reject(new Error("fetch: no HTTP_PROXY (the manifest lists no network hosts)"));
  const proxy = new URL(proxyUrl);
  const target = new URL(url);
  if (target.protocol !== "http:") return Promise.reject(new Error("fetch: only http:// URLs"));
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: proxy.hostname, port: proxy.port, method: "GET", path: target.href, headers: { host: target.host } },
      (res) => {
        const chunks = [];
        res.on("data", (c) => chunks.push(c));
        res.on("end", () => resolve(`${res.statusCode} ${Buffer.concat(chunks).toString("utf8").trim()}`));
      },
    );
    req.setTimeout(15000, () => req.destroy(new Error("fetch: timed out")));
    req.on("error", reject);
    req.end();
  });
}

function runTool(name, input, trace) {
  if (name === "echo") {
    if (!input || typeof input.text !== "string") throw new TypeError("echo: input.text must be a string");
    return `node: ${Array.from(input.text).reverse().join("")}`;
  }
  if (name === "observed") return { ...observed };
  if (name === "trace") return { call: trace, beforeTurn: lastBeforeTurnTrace };
  if (name === "fetch") {
    if (!input || typeof input.url !== "string") throw new TypeError("fetch: input.url must be a string");
    return proxiedGet(input.url);
  }
  throw new Error(`unknown tool ${JSON.stringify(name)}`);
}

// -- the service ------------------------------------------------------------------------------

let server = null;
let exiting = false;

function shutdown(reason, graceMs) {
  if (exiting) return;
  exiting = true;
  log(`shutting down: ${reason}`);
  const force = setTimeout(() => process.exit(0), Math.max(graceMs, 50));
  force.unref();
  server.tryShutdown(() => process.exit(0));
}

const service = {
  Describe: unary((request) => {
    if (request.protocolVersion && request.protocolVersion !== PROTOCOL_VERSION) {
      log(`host speaks protocol ${request.protocolVersion}, this extension ${PROTOCOL_VERSION}`);
    }
    return {
      name: NAME,
      version: VERSION,
      protocolVersion: PROTOCOL_VERSION,
      hooks: ["beforeTurn", "afterToolCall", "onStepFinish"],
      tools: TOOLS,
      features: [], // no "connect": the host uses the unary RPCs
      description: "Echo tool and a system-prompt note, written in Node.js against proto/ without the SDK",
      sdk: `grpc-js/${require("@grpc/grpc-js/package.json").version} node/${process.version}`,
    };
  }),

  BeforeTurn: unary((request, call) => {
    lastBeforeTurnTrace = traceOf(request, call);
    logTrace("beforeTurn", lastBeforeTurnTrace);
    const system = (request.snapshot && request.snapshot.system) || "";
    return { config: { system: system ? `${system}\n\n${SYSTEM_ADDITION}` : SYSTEM_ADDITION } };
  }),

  BeforeToolCall: unary(() => {
    observed.beforeToolCall += 1;
    return {}; // observe only: no decision
  }),

  AfterToolCall: unary(() => {
    observed.afterToolCall += 1;
    return {};
  }),

  OnStepFinish: unary(() => {
    observed.onStepFinish += 1;
    return {};
  }),

  OnChunk: unary(() => {
    observed.onChunk += 1;
    return {};
  }),

  Observe: unary((batch) => {
    observed.batches += 1;
    const items = batch.items || [];
    for (const item of items) {
      if (item.afterToolCall) observed.afterToolCall += 1;
      else if (item.stepFinish) observed.onStepFinish += 1;
      else if (item.chunk) observed.onChunk += 1;
      else if (item.beforeToolCall) observed.beforeToolCall += 1;
    }
    return { handled: items.length, errors: [] };
  }),

  Connect: (call) => {
    // Not advertised in Describe; a host that calls it anyway gets UNIMPLEMENTED.
    call.emit("error", { code: grpc.status.UNIMPLEMENTED, details: `${NAME} does not implement Connect` });
  },

  ExecuteTool: (call) => {
    if (!authorized(call)) {
      call.emit("error", UNAUTHENTICATED);
      return;
    }
    const { name, inputJson } = call.request;
    const trace = traceOf(call.request, call);
    logTrace(`tool ${name}`, trace);
    Promise.resolve()
      .then(() => runTool(name, inputJson ? JSON.parse(inputJson) : null, trace))
      .then(
        (output) => call.write({ outputJson: JSON.stringify(output) }),
        (err) => call.write({ error: hookError("tool", err) }), // HookError.hook of a tool error is "tool"
      )
      .finally(() => call.end());
  },

  Shutdown: (call, callback) => {
    if (!authorized(call)) return callback(UNAUTHENTICATED);
    const graceMs = call.request.graceMs || 0;
    callback(null, {});
    setImmediate(() => shutdown("Shutdown requested by the host", graceMs));
  },
};

server = new grpc.Server();
server.addService(hookwire.Extension.service, service);
server.bindAsync(`unix:${SOCKET}`, grpc.ServerCredentials.createInsecure(), (err) => {
  if (err) {
    log(`cannot bind unix:${SOCKET}: ${err.message}`);
    process.exit(1);
  }
  process.stdout.write(`${HANDSHAKE_MAGIC}|${PROTOCOL_VERSION}|unix:${SOCKET}\n`);
  log(`serving on unix:${SOCKET}`);
});

// The lifeline: the host holds our stdin; EOF means the host is gone (or wants us gone).
process.stdin.on("end", () => shutdown("stdin closed (host went away)", 0));
process.stdin.on("error", () => shutdown("stdin error (host went away)", 0));
process.stdin.resume();
process.on("SIGTERM", () => shutdown("SIGTERM", 0));
