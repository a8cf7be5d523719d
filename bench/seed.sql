-- The benchmark's data: 1M accounts and one workspace with 1M memberships (one per account), made by
-- PostgreSQL itself with generate_series (no row crosses the wire). `{workspace}` is the workspace's id,
-- filled in by bench/run.py. The tables' plain indexes are dropped during the load and built again after
-- it (one sort each instead of a million insertions), and foreign-key triggers are off for this session
-- only: the rows reference what this script just made. The row-count triggers (iam.counts) are off with
-- them: bench/run.py counts the tables afresh after the load (one aggregate instead of a trigger per row).
SET synchronous_commit = off;
SET maintenance_work_mem = '256MB';
SET session_replication_role = replica;

CREATE TEMP TABLE seed_indexes AS
SELECT indexname, indexdef FROM pg_indexes
WHERE schemaname = 'public' AND tablename IN ('accounts_account', 'rbac_membership')
  AND indexname NOT IN (SELECT conname FROM pg_constraint);

DO $$
DECLARE name text;
BEGIN
    FOR name IN SELECT indexname FROM seed_indexes LOOP
        EXECUTE format('DROP INDEX %I', name);
    END LOOP;
END $$;

INSERT INTO accounts_account (
    password, id, tags, meta, created_at, email, name, enabled, verified, is_superuser, session_version
)
SELECT '!', gen_random_uuid(), '[]', '{}', now() - make_interval(secs => n),
       'user' || n || '@seed.bench', 'User ' || md5(n::text), true, n % 10 <> 0, false, 1
FROM generate_series(1, 1000000) AS n;

-- 80% active, 10% invited, 10% suspended, in creation order so statuses interleave.
INSERT INTO rbac_membership (id, tags, meta, created_at, scope, status, account_id, workspace_id)
SELECT gen_random_uuid(), '[]', '{}', created_at, 'workspace',
       (ARRAY['active', 'active', 'active', 'active', 'active', 'active', 'active', 'active', 'invited',
              'suspended'])[1 + (extract(epoch FROM created_at)::bigint % 10)],
       id, '{workspace}'
FROM accounts_account
WHERE email LIKE '%@seed.bench';

DO $$
DECLARE definition text;
BEGIN
    FOR definition IN SELECT indexdef FROM seed_indexes LOOP
        EXECUTE definition;
    END LOOP;
END $$;

DROP TABLE seed_indexes;
SET session_replication_role = DEFAULT;
