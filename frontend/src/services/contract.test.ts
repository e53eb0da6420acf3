// The SPA's wire schemas against the server's contract
// (backend/httpapi/openapi.json, the one source; docs/api.md "The
// contract"). Every fetcher of every services file is called with a
// stand-in request that records the path, method, body and checker; the
// path names the document's operation, and:
//   - every success answer the document allows for it — samples made from
//     its schema, every enum value and branch, with all optional fields
//     and with none — must pass the fetcher's valibot schema (else the
//     dashboard would call a valid answer malformed);
//   - every key a valibot object declares must be in the document's schema
//     at the same place (else the dashboard reads a field the server never
//     sends);
//   - the query parameters and body fields it sends must be documented.
// No mapping is kept by hand but the stream's frame kinds, which are the
// document's x-sse-events keys and are checked both ways.
import { readFileSync } from "node:fs";
import { join } from "node:path";
import * as v from "valibot";
import { describe, expect, test, vi } from "vitest";
import type { Decode } from "./wire";

interface Call {
  path: string;
  method: string;
  body: unknown;
  decode: Decode<unknown>;
}
const calls: Call[] = [];

vi.mock("./http", async (importOriginal) => {
  const orig = await importOriginal<typeof import("./http")>();
  return {
    ...orig,
    request: (path: string, decode: Decode<unknown>, opts: { method?: string; body?: unknown } = {}) => {
      calls.push({ path, method: opts.method ?? "GET", body: opts.body, decode });
      return Promise.resolve(undefined);
    },
  };
});

// ---- the document ----

type Schema = {
  $ref?: string;
  type?: string | string[];
  properties?: Record<string, Schema>;
  required?: string[];
  items?: Schema;
  additionalProperties?: boolean | Schema;
  oneOf?: Schema[];
  anyOf?: Schema[];
  allOf?: Schema[];
  enum?: unknown[];
  const?: unknown;
  format?: string;
  minimum?: number;
};
interface Operation {
  operationId: string;
  parameters?: { name: string; in: string }[];
  requestBody?: { content?: Record<string, { schema: Schema }> };
  responses: Record<string, { content?: Record<string, { schema: Schema }> }>;
  "x-sse-events"?: Record<string, { data: Schema }>;
}
const docPath = join(__dirname, "..", "..", "..", "backend", "httpapi", "openapi.json");
const doc = JSON.parse(readFileSync(docPath, "utf8")) as {
  paths: Record<string, Record<string, Operation>>;
  components: { schemas: Record<string, Schema> };
};

function deref(s: Schema): Schema {
  let n = 0;
  while (s.$ref) {
    if (++n > 20) throw new Error("$ref loop");
    s = doc.components.schemas[s.$ref.replace("#/components/schemas/", "")];
  }
  return s;
}

/** branches: the schemas a value of s may be of (oneOf/anyOf spread, allOf merged). */
function branches(s: Schema): Schema[] {
  s = deref(s);
  if (s.oneOf || s.anyOf) return [...(s.oneOf ?? []), ...(s.anyOf ?? [])].flatMap(branches);
  if (s.allOf) {
    const parts = s.allOf.map(deref);
    return [
      {
        type: "object",
        properties: Object.assign({}, ...parts.map((p) => p.properties ?? {}), s.properties ?? {}),
        required: parts.flatMap((p) => p.required ?? []).concat(s.required ?? []),
      },
    ];
  }
  if (Array.isArray(s.type)) return s.type.map((t) => ({ ...s, type: t }));
  return [s];
}

/** operation finds the operation a request path is for (the most literal template wins). */
function operation(method: string, path: string): { template: string; op: Operation } | undefined {
  const [p] = path.split("?");
  const segs = p.split("/");
  let best: { template: string; op: Operation; lit: number } | undefined;
  for (const [template, item] of Object.entries(doc.paths)) {
    const op = item[method.toLowerCase()];
    if (!op) continue;
    const ts = template.split("/");
    const rest = ts[ts.length - 1] === "{path}";
    if (rest ? segs.length < ts.length : segs.length !== ts.length) continue;
    let lit = 0;
    const ok = ts.every((t, i) => {
      if (t.startsWith("{")) return segs[i] !== "";
      if (t === segs[i]) return ++lit > 0;
      return false;
    });
    if (ok && (!best || lit > best.lit)) best = { template, op, lit };
  }
  return best;
}

function successSchemas(op: Operation): Record<string, Schema | undefined> {
  const out: Record<string, Schema | undefined> = {};
  for (const [status, r] of Object.entries(op.responses)) {
    if (status.startsWith("2")) out[status] = r.content?.["application/json"]?.schema;
  }
  return out;
}

// ---- samples: values the document allows ----

/** width: how many samples it takes to show every enum value and branch once. */
function width(s: Schema, seen = new Set<Schema>()): number {
  s = deref(s);
  if (seen.has(s)) return 1;
  seen.add(s);
  let w = Math.max(1, s.enum?.length ?? 0, (s.oneOf?.length ?? 0) + (s.anyOf?.length ?? 0), Array.isArray(s.type) ? s.type.length : 0);
  for (const c of [...Object.values(s.properties ?? {}), ...(s.oneOf ?? []), ...(s.anyOf ?? []), ...(s.allOf ?? [])]) w = Math.max(w, width(c, seen));
  if (s.items) w = Math.max(w, width(s.items, seen));
  if (typeof s.additionalProperties === "object") w = Math.max(w, width(s.additionalProperties, seen));
  return w;
}

/**
 * sample makes a value of s: the k-th enum value and branch; with full,
 * every optional property, else only the required ones.
 */
function sample(s: Schema, k: number, full: boolean, depth = 0): unknown {
  if (depth > 12) throw new Error("schema too deep to sample");
  const bs = branches(s);
  const b = bs[k % bs.length];
  if (b.const !== undefined) return b.const;
  if (b.enum) return b.enum[k % b.enum.length];
  switch (b.type) {
    case "null":
      return null;
    case "boolean":
      return k % 2 === 0;
    case "integer":
      return Math.max(b.minimum ?? 0, 1) + k;
    case "number":
      return 1.5 + k;
    case "string":
      return b.format === "date-time" ? new Date(Date.UTC(2026, 0, 2, 3, 4, 5 + k)).toISOString() : `s${k}`;
    case "array":
      return b.items ? [sample(b.items, k, full, depth + 1)] : [];
    case "object":
    case undefined: {
      if (!b.properties && typeof b.additionalProperties === "object") return { key: sample(b.additionalProperties, k, full, depth + 1) };
      const out: Record<string, unknown> = {};
      for (const [name, p] of Object.entries(b.properties ?? {})) {
        if (full || b.required?.includes(name)) out[name] = sample(p, k, full, depth + 1);
      }
      return out;
    }
  }
  throw new Error(`cannot sample type ${String(b.type)}`);
}

// ---- keys: what the valibot schemas declare ----

type VSchema = v.GenericSchema & {
  type: string;
  wrapped?: VSchema;
  entries?: Record<string, VSchema>;
  item?: VSchema;
  value?: VSchema;
  options?: VSchema[];
  pipe?: unknown[];
};

/**
 * undocumented lists the keys of valibot schema vs (at path at) that no
 * branch of the document's schema s has.
 */
function undocumented(vs: VSchema, s: Schema, at: string): string[] {
  while (vs.wrapped) vs = vs.wrapped;
  if (vs.type === "union") return (vs.options ?? []).flatMap((o) => undocumented(o, s, at));
  const bs = branches(s);
  if (vs.type === "object" && vs.entries) {
    const keys = Object.keys(vs.entries);
    const objs = bs.filter((b) => b.properties || typeof b.additionalProperties === "object");
    if (objs.length === 0) return bs.some((b) => b.type === "object" || b.type === undefined) ? [] : [`${at}: an object here, the document says ${bs.map((b) => b.type).join("|")}`];
    // The branch this object stands for: the one with the most of its keys.
    const fit = (b: Schema) => keys.filter((key) => b.properties?.[key] || typeof b.additionalProperties === "object").length;
    const best = objs.reduce((a, b) => (fit(b) > fit(a) ? b : a));
    return keys.flatMap((key) => {
      const p = best.properties?.[key] ?? (typeof best.additionalProperties === "object" ? best.additionalProperties : undefined);
      return p ? undocumented(vs.entries![key], p, `${at}.${key}`) : [`${at}.${key}`];
    });
  }
  if (vs.type === "array" && vs.item) {
    const arr = bs.find((b) => b.items);
    return arr?.items ? undocumented(vs.item, arr.items, `${at}[]`) : [];
  }
  if (vs.type === "record" && vs.value) {
    const m = bs.find((b) => typeof b.additionalProperties === "object");
    return m ? undocumented(vs.value, m.additionalProperties as Schema, `${at}{}`) : [];
  }
  return [];
}

// ---- the checks ----

/** rejects returns why decode refuses a sample of s (every enum value and branch, all and no optional fields), or undefined. */
function rejects(s: Schema, decode: Decode<unknown>): string | undefined {
  const schema = decode.schema!;
  const w = width(s);
  for (let k = 0; k < w; k++) {
    for (const full of [true, false]) {
      const value = sample(s, k, full);
      const r = v.safeParse(schema, value);
      if (!r.success) {
        const issue = r.issues[0];
        return `${JSON.stringify(value).slice(0, 200)}… is malformed to the SPA at ${v.getDotPath(issue) ?? "the top"}: ${issue.message}`;
      }
    }
  }
  return undefined;
}

/**
 * checkAnswers: the success answers of one operation against the checkers
 * the SPA reads them with. Each alternative the document gives (a status;
 * a branch of a top-level oneOf/anyOf) is accepted whole by some checker,
 * each checker accepts some alternative whole (GET /api/slots/{name} is a
 * SlotView to one fetcher and, with ?at, a SlotViewAt to another), and no
 * checker reads a key the document lacks.
 */
function checkAnswers(what: string, answers: Schema[], decoders: Decode<unknown>[]): string[] {
  const errs: string[] = [];
  const alternatives = answers.flatMap((s) => {
    const d = deref(s);
    return d.oneOf ?? d.anyOf ?? [s];
  });
  const refused = new Map<Decode<unknown>, string[]>();
  for (const alt of alternatives) {
    const why = decoders.map((dec) => rejects(alt, dec));
    why.forEach((w, i) => w && refused.set(decoders[i], [...(refused.get(decoders[i]) ?? []), w]));
    if (why.every((w) => w)) errs.push(`${what}: the document allows an answer no fetcher accepts: ${why[0]}`);
  }
  for (const dec of decoders) {
    if ((refused.get(dec)?.length ?? 0) === alternatives.length) errs.push(`${what}: a fetcher accepts none of the answers the document allows: ${refused.get(dec)![0]}`);
    for (const key of undocumented(dec.schema as VSchema, { oneOf: answers }, "answer")) errs.push(`${what}: the SPA reads ${key}, which the document does not describe`);
  }
  return errs;
}

// Every fetcher, called once with stand-in arguments: as a string "x", as
// a number 1, as an object no keys.
const stand = new Proxy(
  {},
  {
    get: (_t, key) => (key === Symbol.toPrimitive ? (hint: string) => (hint === "number" ? 1 : "x") : undefined),
    ownKeys: () => [],
  },
);

const modules = import.meta.glob<Record<string, unknown>>(["./*.ts", "!./*.test.ts", "!./http.ts", "!./wire.ts"], { eager: true });

async function callEveryFetcher(): Promise<string[]> {
  const names: string[] = [];
  for (const [file, mod] of Object.entries(modules)) {
    for (const [name, svc] of Object.entries(mod)) {
      if (!name.endsWith("Service") || typeof svc !== "object" || svc === null) continue;
      for (const [fn, f] of Object.entries(svc as Record<string, unknown>)) {
        if (typeof f !== "function") continue;
        names.push(`${file} ${name}.${fn}`);
        await (f as (...a: unknown[]) => unknown)(stand, stand, stand, stand);
      }
    }
  }
  return names;
}

describe("the SPA's wire schemas follow openapi.json", async () => {
  const fetchers = await callEveryFetcher();

  test("every fetcher made a request", () => {
    expect(fetchers.length).toBeGreaterThan(40);
    expect(calls.length).toBeGreaterThanOrEqual(fetchers.length);
  });

  test("every request is a documented operation, with documented query parameters and body fields", () => {
    const errs: string[] = [];
    for (const c of calls) {
      const found = operation(c.method, c.path);
      if (!found) {
        errs.push(`${c.method} ${c.path}: no operation of openapi.json`);
        continue;
      }
      const { template, op } = found;
      const params = new Set((op.parameters ?? []).filter((p) => p.in === "query").map((p) => p.name));
      for (const key of new URLSearchParams(c.path.split("?")[1] ?? "").keys()) {
        if (!params.has(key)) errs.push(`${c.method} ${template}: the SPA sends query parameter ${key}, which the document does not list`);
      }
      const body = op.requestBody?.content?.["application/json"]?.schema;
      if (c.body && typeof c.body === "object" && !template.startsWith("/api/sim/")) {
        const props = new Set(body ? branches(body).flatMap((b) => Object.keys(b.properties ?? {})) : []);
        for (const key of Object.keys(c.body)) {
          if (!props.has(key)) errs.push(`${c.method} ${template}: the SPA sends body field ${key}, which the document does not list`);
        }
      }
    }
    expect(errs).toEqual([]);
  });

  test("every success answer the document allows is one the SPA accepts, and the SPA reads no undocumented field", () => {
    const byOp = new Map<string, { op: Operation; decoders: Set<Decode<unknown>> }>();
    for (const c of calls) {
      const found = operation(c.method, c.path);
      // Not read (nothing), or the simulators' own API (opaque in the document).
      if (!found || !c.decode.schema || found.template.startsWith("/api/sim/")) continue;
      const key = `${c.method} ${found.template}`;
      const e = byOp.get(key) ?? { op: found.op, decoders: new Set() };
      e.decoders.add(c.decode);
      byOp.set(key, e);
    }
    const errs: string[] = [];
    for (const [what, { op, decoders }] of byOp) {
      const answers = Object.values(successSchemas(op)).filter((s): s is Schema => s !== undefined);
      if (answers.length === 0) errs.push(`${what}: the SPA reads an answer the document gives no schema`);
      else errs.push(...checkAnswers(what, answers, [...decoders]));
    }
    expect(errs).toEqual([]);
    expect(byOp.size).toBeGreaterThan(30);
  });

  test("the stream's frames", async () => {
    const { frames } = await import("./stream");
    const events = doc.paths["/api/stream"].get["x-sse-events"] ?? {};
    expect(Object.keys(frames).sort()).toEqual(Object.keys(events).sort());
    const errs = Object.entries(frames).flatMap(([kind, decode]) => checkAnswers(`${kind} frame`, [events[kind].data], [decode]));
    expect(errs).toEqual([]);
  });

  test("the error body", async () => {
    const { ErrorBody } = await import("./http");
    expect(checkAnswers("error", [{ $ref: "#/components/schemas/Error" }], [Object.assign(() => undefined, { schema: ErrorBody })])).toEqual([]);
  });
});
