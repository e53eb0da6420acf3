// OccupantPicker: "occupy for someone else" chooses an existing account or
// token from the server's list (GET /api/occupants), by subject id, never a
// free name (issue 25: a free name could later be taken by a token). The
// empty value is the caller.
import { slotsService } from "../services/slots";
import type { Subject } from "../auth/roles";
import { useT } from "../i18n";
import { useLoad } from "../live/useLoad";

export function OccupantPicker({ me, value, onChange }: { me: Subject; value: string; onChange: (id: string) => void }) {
  const t = useT();
  const list = useLoad("occupants", "", (signal) => slotsService.occupants(signal));
  const others = (list.data ?? []).filter((o) => o.id !== me.id);
  return (
    <label>
      {t("slot.occupy_by")}{" "}
      <select value={value} onChange={(e) => onChange(e.target.value)} data-testid="occupy-for">
        <option value="">{t("slot.occupy_me", { name: me.name })}</option>
        {others.map((o) => (
          <option key={o.id} value={o.id}>
            {o.kind === "token" ? `${o.name} (${t("slot.occupy_token")})` : o.name}
          </option>
        ))}
      </select>
    </label>
  );
}
