import { actorName } from "../format";
import { useT } from "../i18n";

/**
 * Actor names who did something as format.actorName words it ("Slotkeeper
 * 워커 2", "Slotkeeper (기한 타이머)", a person's name). When those words
 * are not the id itself — a worker, the server's own actors — the id stays
 * on hand for operators: the element's title (a tooltip) and data-actor.
 */
export function Actor({ actor }: { actor: string | undefined }) {
  const t = useT();
  if (!actor) return null;
  const name = actorName(actor, t);
  return name === actor ? (
    <span data-actor={actor}>{name}</span>
  ) : (
    <span title={actor} data-actor={actor} className="actor-named">
      {name}
    </span>
  );
}
