-- The pull requests of the PR flow (issue 34; projections.PRView), one row
-- per PR stream. ListPullRequests reads every open one and the most
-- recently changed closed ones.
CREATE TABLE pull_requests (
    stream   text   PRIMARY KEY,
    state    text   NOT NULL,
    position bigint NOT NULL,
    view     jsonb  NOT NULL
);
CREATE INDEX pull_requests_by_state ON pull_requests (state, position DESC);
