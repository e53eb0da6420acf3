// Checking wire JSON where it arrives (issue 26 item 4). The schemas are
// valibot's (docs: README "Dependencies and why"): each services file
// writes its wire types once as a schema, and the TypeScript type is
// inferred from it, so the checker and the type cannot drift apart. They
// follow the server's contract (backend/httpapi/openapi.json): a field the
// server always writes is required, one it may omit is optional, and a Go
// slice may arrive as null. Unknown fields are dropped.
import * as v from "valibot";

/**
 * A Decode turns a parsed JSON value into a checked one, or throws
 * MalformedAnswer. One made by decoder carries its schema, which
 * contract.test.ts holds to the server's OpenAPI document.
 */
export type Decode<T> = ((value: unknown) => T) & { readonly schema?: v.GenericSchema };

/** MalformedAnswer: the JSON is not of the promised type; the message names the first wrong field. */
export class MalformedAnswer extends Error {
  override name = "MalformedAnswer";
}

/** decoder is the Decode of a schema; what names the value in the error ("slot view"). */
export function decoder<S extends v.GenericSchema>(schema: S, what: string): Decode<v.InferOutput<S>> {
  const decode = (value: unknown): v.InferOutput<S> => {
    const r = v.safeParse(schema, value);
    if (r.success) return r.output;
    const issue = r.issues[0];
    const at = v.getDotPath(issue);
    throw new MalformedAnswer(`malformed ${what}${at ? ` at ${at}` : ""}: ${issue.message}`);
  };
  return Object.assign(decode, { schema });
}

/** list is a list the server writes from a Go slice: absent or null reads as null. */
export function list<S extends v.GenericSchema>(item: S) {
  return v.optional(v.nullable(v.array(item)), null);
}

/** int is a JSON number that is an integer (positions, revisions, counts). */
export const int = v.pipe(v.number(), v.integer());

export const str = v.string();
export const optStr = v.optional(v.string());
export const strMap = v.record(v.string(), v.string());

/** listOf is a list answer: a bare array, or an object holding it under key. */
export function listOf<S extends v.GenericSchema>(item: S, key: string, what: string) {
  const items = v.optional(v.nullable(v.array(item)), null);
  return decoder(
    v.pipe(
      v.union([v.array(item), v.object({ [key]: items })]),
      v.transform((x): v.InferOutput<S>[] => (Array.isArray(x) ? x : ((x as Record<string, v.InferOutput<S>[] | null>)[key] ?? []))),
    ),
    what,
  );
}
