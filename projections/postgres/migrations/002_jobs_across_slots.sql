-- GET /api/jobs: every job across slots, newest first, filtered by state,
-- kind, slot (jobs_by_slot) or the person who asked for it.
CREATE INDEX jobs_by_queued ON jobs (queued_position DESC);
CREATE INDEX jobs_by_kind ON jobs (kind, queued_position DESC);
CREATE INDEX jobs_by_state ON jobs ((view->>'state'), queued_position DESC);
CREATE INDEX jobs_by_requester ON jobs ((view->>'requested_by'), queued_position DESC);
CREATE INDEX jobs_uncertain ON jobs (queued_position DESC) WHERE view->>'uncertain_step' <> '';
