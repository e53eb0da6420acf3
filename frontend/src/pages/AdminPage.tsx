import { useId, useRef, useState, type FormEvent } from "react";
import { adminService, type TokenView, type UserView } from "../services/admin";
import { ROLES, atLeast, type Role } from "../auth/roles";
import { useSubject } from "../auth/session";
import { CommandError } from "../components/CommandError";
import { ConsumersPanel } from "../consumers/ConsumersPanel";
import { AdminPullRequests } from "../pullrequests/AdminPullRequests";
import { formatTime } from "../format";
import { useT, type Key } from "../i18n";
import { announce } from "../live/announce";
import { serverNow } from "../live/clock";
import { useCommand } from "../live/useCommand";
import { useLoad } from "../live/useLoad";
import { TableWrap } from "../components/TableWrap";

/** EXPIRIES are the token lifetimes offered, as Go durations (the server's `expires`). */
export const EXPIRIES: readonly { value: string; label: Key }[] = [
  { value: "24h", label: "admin.exp_day" },
  { value: "168h", label: "admin.exp_week" },
  { value: "720h", label: "admin.exp_month" },
  { value: "2160h", label: "admin.exp_quarter" },
  { value: "8760h", label: "admin.exp_year" },
];

/** AdminPage: users (create, change role), API tokens (create, list, revoke), pull-request repositories and deliveries. Admins only. */
export function AdminPage() {
  const t = useT();
  const subject = useSubject();
  if (!atLeast(subject, "admin")) {
    return (
      <section aria-labelledby="admin-title">
        <h1 id="admin-title">{t("admin.title")}</h1>
        <p className="error" data-testid="admin-forbidden">
          {t("admin.forbidden")}
        </p>
      </section>
    );
  }
  return (
    <section aria-labelledby="admin-title" data-testid="admin-page" className="admin">
      <h1 id="admin-title">{t("admin.title")}</h1>
      <Users selfId={subject?.id ?? ""} />
      <Tokens />
      <AdminPullRequests />
      <ConsumersPanel />
    </section>
  );
}

function RoleSelect({
  value,
  onChange,
  label,
  testid,
  disabled,
}: {
  value: string;
  onChange: (r: Role) => void;
  label: string;
  testid?: string;
  disabled?: boolean;
}) {
  const t = useT();
  return (
    <select aria-label={label} value={value} disabled={disabled} onChange={(e) => onChange(e.target.value as Role)} data-testid={testid}>
      {ROLES.map((r) => (
        <option key={r} value={r}>
          {t.dyn("role", r)}
        </option>
      ))}
    </select>
  );
}

/** Secret shows a password or token once, with a copy button. */
export function Secret({ intro, value, onDone, testid }: { intro: string; value: string; onDone: () => void; testid: string }) {
  const t = useT();
  const [copied, setCopied] = useState<"" | "ok" | "failed">("");
  const ref = useRef<HTMLInputElement>(null);
  const id = useId();
  const copy = async () => {
    try {
      await navigator.clipboard.writeText(value);
      setCopied("ok");
    } catch {
      ref.current?.select();
      setCopied("failed");
    }
  };
  return (
    <div className="secret" role="group" aria-labelledby={id} data-testid={testid}>
      <p id={id}>{intro}</p>
      <div className="secret-row">
        <input
          ref={ref}
          readOnly
          value={value}
          aria-label={t("admin.secret_label")}
          onFocus={(e) => e.currentTarget.select()}
          spellCheck={false}
          data-testid={`${testid}-value`}
        />
        <button type="button" onClick={() => void copy()} data-testid={`${testid}-copy`}>
          {t("admin.copy")}
        </button>
        <button type="button" onClick={onDone} data-testid={`${testid}-done`}>
          {t("admin.dismiss")}
        </button>
      </div>
      <p className="small" role="status">
        {copied === "ok" ? t("admin.copied") : copied === "failed" ? t("admin.copy_failed") : ""}
      </p>
    </div>
  );
}

function Users({ selfId }: { selfId: string }) {
  const t = useT();
  const [nonce, setNonce] = useState(0);
  const users = useLoad("admin:users", String(nonce), (signal) => adminService.users(signal));
  const create = useCommand();
  const change = useCommand();
  const [name, setName] = useState("");
  const [role, setRole] = useState<Role>("member");
  const [password, setPassword] = useState("");
  const [shown, setShown] = useState<{ name: string; password: string } | undefined>(undefined);

  const submit = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const n = name.trim();
    const res = await create.run(() => adminService.createUser({ name: n, role, ...(password ? { password } : {}) }));
    if (!res) return;
    announce(t("admin.user_created", { name: n }));
    setName("");
    setPassword("");
    setShown(res.password ? { name: n, password: res.password } : undefined);
    setNonce((x) => x + 1);
  };
  const setUserRole = async (u: UserView, r: Role) => {
    const res = await change.run(async () => {
      await adminService.setRole(u.id, r);
      return true;
    });
    if (!res) return;
    announce(t("admin.role_changed", { name: u.name, role: t.dyn("role", r) }));
    setNonce((x) => x + 1);
  };

  const list = users.data ?? [];
  return (
    <section aria-labelledby="users-title" data-testid="admin-users">
      <h2 id="users-title">{t("admin.users")}</h2>
      <form className="admin-form" onSubmit={(e) => void submit(e)}>
        <label>
          <span>{t("admin.user_name")}</span>
          <input required value={name} onChange={(e) => setName(e.target.value)} autoComplete="off" data-testid="user-name" />
        </label>
        <label>
          <span>{t("admin.role")}</span>
          <RoleSelect value={role} onChange={setRole} label={t("admin.role")} testid="user-role" />
        </label>
        <label>
          <span>{t("admin.password")}</span>
          <input
            type="password"
            value={password}
            onChange={(e) => setPassword(e.target.value)}
            autoComplete="new-password"
            aria-describedby="pw-hint"
            data-testid="user-password"
          />
          <span id="pw-hint" className="muted small">
            {t("admin.password_hint")}
          </span>
        </label>
        <button type="submit" className="primary" disabled={create.pending} data-testid="user-create">
          {t("admin.create_user")}
        </button>
      </form>
      <CommandError error={create.error} />
      {shown && (
        <Secret
          intro={t("admin.generated_password", { name: shown.name })}
          value={shown.password}
          onDone={() => setShown(undefined)}
          testid="user-secret"
        />
      )}
      <CommandError error={change.error ?? users.error} />
      {users.data && list.length === 0 && <p>{t("admin.no_users")}</p>}
      {list.length > 0 && (
        <TableWrap label={t("admin.users")}>
          <table className="nowrap-cells" data-testid="users-table">
            <thead>
              <tr>
                <th scope="col">{t("admin.user_name")}</th>
                <th scope="col">{t("admin.role")}</th>
                <th scope="col">{t("admin.created_at")}</th>
              </tr>
            </thead>
            <tbody>
              {list.map((u) => {
                // The subject id of an account is "user:<id>".
                const self = u.id === selfId || `user:${u.id}` === selfId;
                return (
                  <tr key={u.id} data-testid="user-row" data-user={u.name}>
                    <td>
                      {u.name} {self && <span className="muted">{t("admin.you")}</span>}
                    </td>
                    <td>
                      {/* Your own role is not changed here: one slip would lock you out of this page. */}
                      <RoleSelect
                        value={u.role}
                        label={t("admin.change_role", { name: u.name })}
                        onChange={(r) => void setUserRole(u, r)}
                        testid="user-row-role"
                        disabled={self || change.pending}
                      />
                    </td>
                    <td>{u.created_at ? formatTime(u.created_at, t.lang) : ""}</td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableWrap>
      )}
    </section>
  );
}

/** tokenState: revoked, expired (by the server clock) or active. */
export function tokenState(tok: TokenView, now: number): "active" | "revoked" | "expired" {
  if (tok.state === "active" || tok.state === "revoked" || tok.state === "expired") return tok.state;
  if (tok.revoked_at) return "revoked";
  if (tok.expires_at && Date.parse(tok.expires_at) <= now) return "expired";
  return "active";
}

function Tokens() {
  const t = useT();
  const [nonce, setNonce] = useState(0);
  const tokens = useLoad("admin:tokens", String(nonce), (signal) => adminService.tokens(signal));
  const create = useCommand();
  const revoke = useCommand();
  const [name, setName] = useState("");
  const [role, setRole] = useState<Role>("viewer");
  const [expires, setExpires] = useState("720h");
  const [shown, setShown] = useState<{ name: string; token: string } | undefined>(undefined);
  const [confirming, setConfirming] = useState<string | undefined>(undefined);

  const submit = async (e: FormEvent<HTMLFormElement>) => {
    e.preventDefault();
    const n = name.trim();
    const res = await create.run(() => adminService.createToken({ name: n, role, expires }));
    if (!res) return;
    setName("");
    setShown({ name: n, token: res.token });
    setNonce((x) => x + 1);
  };
  const doRevoke = async (tok: TokenView) => {
    const res = await revoke.run(async () => {
      await adminService.revokeToken(tok.id);
      return true;
    });
    if (!res) return;
    setConfirming(undefined);
    announce(t("admin.revoked", { name: tok.name }));
    setNonce((x) => x + 1);
  };

  const list = tokens.data ?? [];
  const now = serverNow();
  return (
    <section aria-labelledby="tokens-title" data-testid="admin-tokens">
      <h2 id="tokens-title">{t("admin.tokens")}</h2>
      <p className="muted">{t("admin.tokens_intro")}</p>
      <form className="admin-form" onSubmit={(e) => void submit(e)}>
        <label>
          <span>{t("admin.token_name")}</span>
          <input required value={name} onChange={(e) => setName(e.target.value)} autoComplete="off" data-testid="token-name" />
        </label>
        <label>
          <span>{t("admin.role")}</span>
          <RoleSelect value={role} onChange={setRole} label={t("admin.role")} testid="token-role" />
        </label>
        <label>
          <span>{t("admin.expires")}</span>
          <select value={expires} onChange={(e) => setExpires(e.target.value)} data-testid="token-expires">
            {EXPIRIES.map((x) => (
              <option key={x.value} value={x.value}>
                {t(x.label)}
              </option>
            ))}
          </select>
        </label>
        <button type="submit" className="primary" disabled={create.pending} data-testid="token-create">
          {t("admin.create_token")}
        </button>
      </form>
      <CommandError error={create.error} />
      {shown && (
        <Secret
          intro={t("admin.token_created", { name: shown.name })}
          value={shown.token}
          onDone={() => setShown(undefined)}
          testid="token-secret"
        />
      )}
      <CommandError error={revoke.error ?? tokens.error} />
      {tokens.data && list.length === 0 && <p>{t("admin.no_tokens")}</p>}
      {list.length > 0 && (
        <TableWrap label={t("admin.tokens")}>
          <table className="nowrap-cells" data-testid="tokens-table">
            <thead>
              <tr>
                <th scope="col">{t("admin.token_name")}</th>
                <th scope="col">{t("admin.role")}</th>
                <th scope="col">{t("admin.created_at")}</th>
                <th scope="col">{t("admin.expires_at")}</th>
                <th scope="col">{t("admin.state")}</th>
                <th scope="col">{t("admin.actions")}</th>
              </tr>
            </thead>
            <tbody>
              {list.map((tok) => {
                const st = tokenState(tok, now);
                return (
                  <tr key={tok.id} data-testid="token-row" data-token={tok.name} data-state={st}>
                    <td>{tok.name}</td>
                    <td>{t.dyn("role", tok.role)}</td>
                    <td>{tok.created_at ? formatTime(tok.created_at, t.lang) : ""}</td>
                    <td>{tok.expires_at ? formatTime(tok.expires_at, t.lang) : ""}</td>
                    <td>
                      <span className={`badge tok-${st}`}>{t(`admin.token_${st}`)}</span>
                    </td>
                    <td>
                      {st === "active" && confirming !== tok.id && (
                        <button type="button" className="danger" onClick={() => setConfirming(tok.id)} data-testid="token-revoke">
                          {t("admin.revoke")}
                        </button>
                      )}
                      {confirming === tok.id && (
                        <span className="inline-confirm" role="group" aria-label={t("admin.revoke_confirm", { name: tok.name })}>
                          <span>{t("admin.revoke_confirm", { name: tok.name })}</span>{" "}
                          <button type="button" onClick={() => setConfirming(undefined)}>
                            {t("common.cancel")}
                          </button>{" "}
                          <button
                            type="button"
                            className="danger"
                            disabled={revoke.pending}
                            onClick={() => void doRevoke(tok)}
                            data-testid="token-revoke-confirm"
                          >
                            {t("admin.revoke")}
                          </button>
                        </span>
                      )}
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </TableWrap>
      )}
    </section>
  );
}
