// Roles and what each may do, as the server's policy table says (issue 11).
// The server decides; the UI only hides what a role may not use.
import type { SlotView } from "../services/slots";

export const ROLES = ["viewer", "member", "operator", "admin"] as const;
export type Role = (typeof ROLES)[number];

export interface Subject {
  id: string;
  name: string;
  role: string;
}

/** rank orders the roles; an unknown role ranks below viewer (it may do nothing). */
export function rank(role: string): number {
  return ROLES.indexOf(role as Role);
}

export function atLeast(subject: Subject | undefined, role: Role): boolean {
  return subject !== undefined && rank(subject.role) >= rank(role);
}

/** isRole narrows a string to a known role. */
export function isRole(v: string): v is Role {
  return (ROLES as readonly string[]).includes(v);
}

/**
 * ownsSlot: the slot is occupied by this subject — the server's rule
 * (slots.IsOccupant): by subject id; an occupant recorded by name only (an
 * old log, the demo's seeded people) is the account of that name, never a
 * token.
 */
export function ownsSlot(subject: Subject | undefined, slot: SlotView): boolean {
  if (!subject || !slot.occupant) return false;
  if (slot.occupant_id) return slot.occupant_id === subject.id;
  return slot.occupant === subject.name && subject.id.startsWith("user:");
}

/** SlotActions is what a subject may try on one slot (the server still decides). */
export interface SlotActions {
  occupy: boolean;
  /** occupyForOthers: may name someone else as the occupant. */
  occupyForOthers: boolean;
  extend: boolean;
  release: boolean;
  /** releaseNeedsReason: releasing someone else's slot; the server records a reason. */
  releaseNeedsReason: boolean;
  teardown: boolean;
  promote: boolean;
}

export function slotActions(subject: Subject | undefined, slot: SlotView): SlotActions {
  const member = atLeast(subject, "member");
  const operator = atLeast(subject, "operator");
  const own = ownsSlot(subject, slot);
  return {
    occupy: member,
    occupyForOthers: operator,
    extend: operator || (member && own),
    release: operator || (member && own),
    releaseNeedsReason: operator && !own,
    teardown: operator,
    promote: operator,
  };
}

/** jobActions: cancel and resume are operator commands. */
export function jobActions(subject: Subject | undefined): { cancel: boolean; resume: boolean } {
  const operator = atLeast(subject, "operator");
  return { cancel: operator, resume: operator };
}
