// What kind of action an audit entry records, for the audit page's chips.
import vocabulary from "../i18n/vocabulary.json";

export const ACTION_GROUPS = ["occupancy", "jobs", "steps", "waitlist", "accounts", "notifications", "reconcile"] as const;
export type ActionGroup = (typeof ACTION_GROUPS)[number];

const SLOT_EVENTS = new Set([
  "SlotRegistered",
  "SlotOccupied",
  "OccupancyExtended",
  "SlotVacated",
  "SlotRetired",
  "SlotPromoted",
  "TeardownIncomplete",
  "DeadlineWarning",
]);
const JOB_EVENTS = new Set([
  "JobQueued",
  "JobAccepted",
  "JobClaimed",
  "LeaseRenewed",
  "JobResumed",
  "JobCancelled",
  "JobSucceeded",
  "JobFailed",
  "JobTimedOut",
  "JobAbandoned",
  "JobReleased",
]);

/** actionGroup puts an event type in one group; a type it does not know goes with the steps. */
export function actionGroup(type: string): ActionGroup {
  if (SLOT_EVENTS.has(type)) return "occupancy";
  if (JOB_EVENTS.has(type)) return "jobs";
  if (/^(Waitlist|Offer|SlotHeld|SlotHold)/.test(type)) return "waitlist";
  if (/^(User|Password|Token)/.test(type)) return "accounts";
  if (type.startsWith("Notification")) return "notifications";
  if (type.startsWith("Reconcile")) return "reconcile";
  return "steps";
}

/** EVENT_TYPES is every event type the server writes (vocabulary.json, checked against the Go source). */
export const EVENT_TYPES: readonly string[] = vocabulary.event_types;
