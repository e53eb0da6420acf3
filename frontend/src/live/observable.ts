// A minimal external store for useSyncExternalStore: an immutable value that
// is replaced (never mutated) on every update, and a set of listeners.

export interface Observable<T> {
  get(): T;
  set(next: T): void;
  update(fn: (prev: T) => T): void;
  subscribe(listener: () => void): () => void;
}

/**
 * Every store made, with the value it started from: the test setup checks
 * after each test that every one is back at its start (src/test/setup.ts),
 * so a new store without a reset fails the test that leaves it changed
 * instead of leaking into the next one. A dozen entries, made at load.
 */
const made: { get: () => unknown; initial: unknown; where: string }[] = [];

/** storesAwayFromStart lists the stores not at their starting value (deep equality) and where each was made. */
export function storesAwayFromStart(equal: (a: unknown, b: unknown) => boolean): { where: string; value: unknown; initial: unknown }[] {
  return made.filter((m) => !equal(m.get(), m.initial)).map((m) => ({ where: m.where, value: m.get(), initial: m.initial }));
}

export function observable<T>(initial: T): Observable<T> {
  let value = initial;
  const listeners = new Set<() => void>();
  made.push({ get: () => value, initial, where: new Error().stack?.split("\n")[2]?.trim() ?? "" });
  const set = (next: T): void => {
    if (Object.is(next, value)) return;
    value = next;
    for (const l of [...listeners]) l();
  };
  return {
    get: () => value,
    set,
    update: (fn) => set(fn(value)),
    subscribe(listener) {
      listeners.add(listener);
      return () => {
        listeners.delete(listener);
      };
    },
  };
}
