-- Read models of Slotkeeper. Views are stored whole as JSONB (the REST/SSE
-- shape), with the columns the queries filter and order on beside them.

CREATE TABLE slots (
    name     text   PRIMARY KEY,
    position bigint NOT NULL,
    view     jsonb  NOT NULL
);

CREATE TABLE jobs (
    id              text   PRIMARY KEY,
    slot            text   NOT NULL,
    kind            text   NOT NULL,
    queued_position bigint NOT NULL,
    position        bigint NOT NULL,
    view            jsonb  NOT NULL
);
-- Jobs of a slot newest first (paging), and the latest job by slot + kind.
CREATE INDEX jobs_by_slot ON jobs (slot, queued_position DESC);
CREATE INDEX jobs_by_slot_kind ON jobs (slot, kind, queued_position DESC);

-- One row per event of the log; the primary key makes a double apply an
-- error instead of a duplicate.
CREATE TABLE audit (
    position bigint PRIMARY KEY,
    slot     text   NOT NULL DEFAULT '',
    job_id   text   NOT NULL DEFAULT '',
    actor    text   NOT NULL DEFAULT '',
    type     text   NOT NULL,
    time_ns  bigint NOT NULL, -- Unix nanoseconds: exact, unlike timestamptz
    entry    jsonb  NOT NULL
);
CREATE INDEX audit_by_slot ON audit (slot, position);
CREATE INDEX audit_by_job ON audit (job_id, position);
CREATE INDEX audit_by_actor ON audit (actor, position);
CREATE INDEX audit_by_type ON audit (type, position);
CREATE INDEX audit_by_time ON audit (time_ns);

-- The last applied position; written in the same transaction as the rows.
CREATE TABLE checkpoint (
    id       int    PRIMARY KEY CHECK (id = 1),
    position bigint NOT NULL
);
INSERT INTO checkpoint (id, position) VALUES (1, 0);
