-- The identity (events.StoreCreated) of the event store the read model is
-- built from: a process on another store (wiped, replaced) must not project
-- that log into this one or answer from it. Empty: not bound yet (a new or
-- reset read model, or one built before identities existed); the first
-- server to start binds it.
ALTER TABLE checkpoint ADD COLUMN store_id text NOT NULL DEFAULT '';
