// Administration (admin role): accounts, tokens, and the log consumers'
// parked events (GET /api/admin/consumers).
import * as v from "valibot";
import { enc, nothing, request } from "./http";
import { decoder, int, listOf, optStr, str } from "./wire";

export const UserView = v.object({
  id: str,
  name: str,
  role: str,
  created_at: optStr,
  created_by: optStr,
  /** source: local | oidc */
  source: optStr,
});
export type UserView = v.InferOutput<typeof UserView>;

/** CreatedUser: the new user; password only when the server generated one (shown once). */
export const CreatedUser = v.object({
  id: optStr,
  name: optStr,
  role: optStr,
  password: optStr,
});
export type CreatedUser = v.InferOutput<typeof CreatedUser>;

export const TokenView = v.object({
  id: str,
  name: str,
  role: str,
  created_at: optStr,
  expires_at: optStr,
  revoked_at: optStr,
  created_by: optStr,
  /** state: the server's word (active | expired | revoked), preferred over the page's own reckoning. */
  state: optStr,
});
export type TokenView = v.InferOutput<typeof TokenView>;

/** CreatedToken: the secret is in this answer only. */
export const CreatedToken = v.object({ id: str, token: str, name: optStr, role: optStr, expires_at: optStr });
export type CreatedToken = v.InferOutput<typeof CreatedToken>;

/** ParkedEvent is one event a consumer skipped (backend/consumer.Parked). */
export const ParkedEvent = v.object({
  consumer: str,
  position: int,
  stream: str,
  revision: int,
  type: str,
  event_id: str,
  error: str,
  at: str,
});
export type ParkedEvent = v.InferOutput<typeof ParkedEvent>;

/** ConsumersReport is the answer of GET /api/admin/consumers. */
export const ConsumersReport = v.object({
  parked: v.optional(v.nullable(v.array(ParkedEvent)), []),
  parked_total: v.optional(int, 0),
  stopped: v.optional(v.nullable(v.record(v.string(), v.string())), {}),
});
export type ConsumersReport = { parked: ParkedEvent[]; parked_total: number; stopped: Record<string, string> };

const users = listOf(UserView, "users", "user list");
const tokens = listOf(TokenView, "tokens", "token list");
const consumers = decoder(
  v.pipe(ConsumersReport, v.transform((r): ConsumersReport => ({ parked: r.parked ?? [], parked_total: r.parked_total, stopped: r.stopped ?? {} }))),
  "consumers report",
);

export const adminService = {
  users: (signal?: AbortSignal) => request("/api/admin/users", users, { signal }),
  createUser: (body: { name: string; role: string; password?: string }) =>
    request("/api/admin/users", decoder(CreatedUser, "created user"), { method: "POST", body }),
  setRole: (id: string, role: string) => request(`/api/admin/users/${enc(id)}/role`, nothing, { method: "PUT", body: { role } }),
  tokens: (signal?: AbortSignal) => request("/api/admin/tokens", tokens, { signal }),
  createToken: (body: { name: string; role: string; expires: string }) =>
    request("/api/admin/tokens", decoder(CreatedToken, "created token"), { method: "POST", body }),
  revokeToken: (id: string) => request(`/api/admin/tokens/${enc(id)}`, nothing, { method: "DELETE" }),
  consumers: (signal?: AbortSignal) => request("/api/admin/consumers", consumers, { signal }),
};
