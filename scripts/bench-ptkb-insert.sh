#!/bin/sh
# Old vs new PTKB insertion (issue 16): the SQL convrag ran before (one max() and one INSERT per
# statement) and runs now (one max(), one UNNEST insert), N statements into one conversation.
# Usage: scripts/bench-ptkb-insert.sh [N]   (CONVRAG_TEST_DATABASE_URL: the server to use)
set -e
N=${1:-20000}
ADMIN=${CONVRAG_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres}
DB=limits_bench_$$
psql -q "$ADMIN" -c "CREATE DATABASE $DB"
URL="${ADMIN%/*}/$DB"
psql -q "$URL" -f "$(dirname "$0")/../migrations/20261121000001_initial.sql"
psql -q "$URL" <<SQL
INSERT INTO users (name) VALUES ('u');
INSERT INTO conversations (id, user_id) VALUES ('00000000-0000-0000-0000-000000000001', 1), ('00000000-0000-0000-0000-000000000002', 1);
\timing on
\echo old: one max() and one INSERT per statement
DO \$\$
DECLARE next_id bigint;
BEGIN
  FOR i IN 1..$N LOOP
    SELECT coalesce(max(statement_id::bigint), 0) + 1 INTO next_id FROM ptkb_statements
      WHERE conversation_id = '00000000-0000-0000-0000-000000000001' AND statement_id ~ '^[0-9]{1,18}\$';
    INSERT INTO ptkb_statements (conversation_id, statement_id, text, visible_from_seq)
      VALUES ('00000000-0000-0000-0000-000000000001', next_id::text, 'Statement ' || i, 1);
  END LOOP;
END \$\$;
\echo new: one max() and one UNNEST insert
SELECT coalesce(max(statement_id::bigint), 0) + 1 FROM ptkb_statements
  WHERE conversation_id = '00000000-0000-0000-0000-000000000002' AND statement_id ~ '^[0-9]{1,18}\$';
INSERT INTO ptkb_statements (conversation_id, statement_id, text, visible_from_seq)
  SELECT '00000000-0000-0000-0000-000000000002', s.statement_id, s.text, 1
  FROM UNNEST((SELECT array_agg(g::text) FROM generate_series(1, $N) g),
              (SELECT array_agg('Statement ' || g) FROM generate_series(1, $N) g))
  WITH ORDINALITY AS s (statement_id, text, ord) ORDER BY s.ord;
SQL
psql -q "$ADMIN" -c "DROP DATABASE $DB WITH (FORCE)"
