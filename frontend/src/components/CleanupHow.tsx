import type { Cleanup } from "../leftovers";
import { useT } from "../i18n";
import { CopyButton } from "./ResourceId";

/**
 * CleanupHow says how a person cleans what is left on a server, in the
 * reader's language, with the command alone to copy: the one wording the
 * slot, the job and the Remaining page share (issue 35 item 3).
 */
export function CleanupHow({ cleanup, id }: { cleanup: Cleanup; id: string }) {
  const t = useT();
  return (
    <div className="cleanup" data-testid="cleanup" data-code={cleanup.code}>
      {cleanup.code === "bind_mount_rm" ? (
        <span className="small">{t("remaining.cleanup.bind_mount_rm", { dir: id })}</span>
      ) : (
        <>
          <span className="small">{t(cleanup.code === "unreachable_rm" ? "remaining.cleanup.unreachable_rm" : "remaining.cleanup.docker_volume_rm")}</span>{" "}
          {cleanup.command && (
            <>
              <code>{cleanup.command}</code> <CopyButton text={cleanup.command} testId="copy-cleanup" />
            </>
          )}
        </>
      )}
    </div>
  );
}
