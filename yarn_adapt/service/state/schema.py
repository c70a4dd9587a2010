"""The service database's schema: each step of :data:`MIGRATIONS` takes the file from
one ``PRAGMA user_version`` to the next (:class:`~yarn_adapt.service.state.database.Database`
runs them at open, one transaction per step)."""

from __future__ import annotations

SCHEMA_V1 = """
CREATE TABLE rounds (
    id INTEGER PRIMARY KEY,
    started_at REAL NOT NULL,
    finished_at REAL,
    status TEXT NOT NULL DEFAULT 'running',
    reason TEXT NOT NULL DEFAULT '',
    timings TEXT NOT NULL DEFAULT '{}'
);
CREATE TABLE proposals (
    id INTEGER PRIMARY KEY,
    round_id INTEGER REFERENCES rounds(id),
    created_at REAL NOT NULL,
    updated_at REAL NOT NULL,
    state TEXT NOT NULL,
    target TEXT NOT NULL,
    base_xml TEXT NOT NULL,
    proposed_xml TEXT NOT NULL,
    changes TEXT NOT NULL,
    groups TEXT NOT NULL,
    changed_groups TEXT NOT NULL DEFAULT '[]',
    cluster_before_s REAL NOT NULL,
    cluster_after_s REAL NOT NULL,
    reasons TEXT NOT NULL,
    gate TEXT NOT NULL DEFAULT '',
    apply_id TEXT NOT NULL DEFAULT '',
    note TEXT NOT NULL DEFAULT ''
);
CREATE INDEX proposals_state ON proposals(state);
CREATE TABLE decisions (
    id INTEGER PRIMARY KEY,
    round_id INTEGER REFERENCES rounds(id),
    at REAL NOT NULL,
    kind TEXT NOT NULL,
    reason TEXT NOT NULL,
    grp TEXT NOT NULL DEFAULT '',
    proposal_id INTEGER REFERENCES proposals(id)
);
CREATE TABLE applies (
    id INTEGER PRIMARY KEY,
    proposal_id INTEGER NOT NULL REFERENCES proposals(id),
    apply_id TEXT NOT NULL UNIQUE,
    kind TEXT NOT NULL,
    actor TEXT NOT NULL,
    started_at REAL NOT NULL,
    finished_at REAL,
    result TEXT NOT NULL DEFAULT 'running',
    detail TEXT NOT NULL DEFAULT '',
    config_xml TEXT NOT NULL
);
CREATE TABLE audit (
    id INTEGER PRIMARY KEY,
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    action TEXT NOT NULL,
    proposal_id INTEGER,
    detail TEXT NOT NULL DEFAULT ''
);
CREATE TABLE journal (
    seq INTEGER PRIMARY KEY,
    apply_id TEXT NOT NULL,
    step TEXT NOT NULL,
    applier TEXT NOT NULL,
    target TEXT NOT NULL,
    backup TEXT NOT NULL DEFAULT '',
    new_sha256 TEXT NOT NULL DEFAULT '',
    detail TEXT NOT NULL DEFAULT '',
    at REAL NOT NULL
);
CREATE INDEX journal_apply ON journal(apply_id);
CREATE TABLE realized (
    proposal_id INTEGER NOT NULL REFERENCES proposals(id),
    grp TEXT NOT NULL,
    interval INTEGER NOT NULL,
    window_start_ms INTEGER NOT NULL,
    window_end_ms INTEGER NOT NULL,
    jobs INTEGER NOT NULL,
    mean_s REAL,
    predicted_s REAL NOT NULL,
    PRIMARY KEY (proposal_id, grp, interval)
);
"""

# The operators' console: per-round queue usage and group latency, every
# configuration that ran, and where an operator-made proposal came from.
SCHEMA_CONSOLE = """
CREATE TABLE queue_usage (
    round_id INTEGER NOT NULL REFERENCES rounds(id),
    at REAL NOT NULL,
    queue TEXT NOT NULL,
    used_percent REAL NOT NULL,
    guaranteed_percent REAL,
    pending_containers INTEGER NOT NULL,
    running_apps INTEGER NOT NULL,
    pending_apps INTEGER NOT NULL,
    PRIMARY KEY (round_id, queue)
);
CREATE TABLE group_latency (
    round_id INTEGER NOT NULL REFERENCES rounds(id),
    at REAL NOT NULL,
    grp TEXT NOT NULL,
    jobs INTEGER NOT NULL,
    mean_s REAL,
    PRIMARY KEY (round_id, grp)
);
CREATE TABLE versions (
    id INTEGER PRIMARY KEY,
    seen_at REAL NOT NULL,
    sha256 TEXT NOT NULL,
    xml TEXT NOT NULL,
    actor TEXT NOT NULL,
    why TEXT NOT NULL,
    proposal_id INTEGER REFERENCES proposals(id),
    apply_id TEXT NOT NULL DEFAULT '',
    round_id INTEGER
);
CREATE TABLE proposal_origin (
    proposal_id INTEGER PRIMARY KEY REFERENCES proposals(id),
    kind TEXT NOT NULL,
    version_id INTEGER REFERENCES versions(id),
    detail TEXT NOT NULL DEFAULT ''
);
"""

# Every journal entry carries what recovery needs: both hashes and both mutation bodies.
SCHEMA_JOURNAL = """
ALTER TABLE journal ADD COLUMN old_sha256 TEXT NOT NULL DEFAULT '';
ALTER TABLE journal ADD COLUMN forward_body TEXT NOT NULL DEFAULT '';
ALTER TABLE journal ADD COLUMN reverse_body TEXT NOT NULL DEFAULT '';
"""

# Every prediction checked on its own population once those jobs finished.
SCHEMA_PREDICTIONS = """
CREATE TABLE prediction_errors (
    proposal_id INTEGER NOT NULL REFERENCES proposals(id),
    grp TEXT NOT NULL,
    config TEXT NOT NULL,
    predicted_s REAL NOT NULL,
    low_s REAL,
    high_s REAL,
    realised_s REAL NOT NULL,
    jobs INTEGER NOT NULL,
    finished INTEGER NOT NULL,
    window_start_s REAL NOT NULL,
    window_end_s REAL NOT NULL,
    error REAL NOT NULL,
    PRIMARY KEY (proposal_id, grp)
);
"""

# One credential per node agent: the public id it is found by, the node it may read
# for, and only the SHA-256 of the token (see yarn_adapt/service/state/agent_tokens.py).
SCHEMA_AGENT_TOKENS = """
CREATE TABLE agent_tokens (
    token_id TEXT PRIMARY KEY,
    node TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL,
    issued_at REAL NOT NULL,
    issued_by TEXT NOT NULL
);
"""

# Who did it and why: an operator's reason beside each audit entry and apply; named
# operator tokens (a hash only, like the agents'); the demo's summary of its run.
SCHEMA_OPERATORS = """
ALTER TABLE audit ADD COLUMN reason TEXT NOT NULL DEFAULT '';
ALTER TABLE applies ADD COLUMN reason TEXT NOT NULL DEFAULT '';
CREATE TABLE operator_tokens (
    token_id TEXT PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    sha256 TEXT NOT NULL,
    issued_at REAL NOT NULL,
    issued_by TEXT NOT NULL
);
CREATE TABLE run_summary (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    at REAL NOT NULL,
    summary TEXT NOT NULL
);
"""

MIGRATIONS: tuple[str, ...] = (
    SCHEMA_V1,
    SCHEMA_CONSOLE,
    SCHEMA_JOURNAL,
    SCHEMA_PREDICTIONS,
    SCHEMA_AGENT_TOKENS,
    SCHEMA_OPERATORS,
)
"""``MIGRATIONS[n]`` takes a database from version ``n`` to ``n + 1``."""

SCHEMA_VERSION = len(MIGRATIONS)


def statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]
