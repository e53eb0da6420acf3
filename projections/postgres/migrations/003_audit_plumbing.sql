-- The audit leaves out the machinery's records unless asked
-- (projections.IsPlumbing, issue 25): mark the rows projected before the
-- flag existed, and the actor kind that names can tell (workers, the
-- system). An old row's actor_id is unknown (it was not in the entry).
UPDATE audit SET entry = entry || '{"plumbing": true}'::jsonb
WHERE type IN ('ConsumerCheckpointed', 'SessionActive', 'ReadinessProbe')
   OR (type = 'SessionStarted' AND entry->'args'->>'source' = 'demo');
UPDATE audit SET entry = entry || jsonb_build_object('actor_kind', split_part(actor, ':', 1))
WHERE (actor LIKE 'worker:%' OR actor LIKE 'system:%') AND NOT entry ? 'actor_kind';
