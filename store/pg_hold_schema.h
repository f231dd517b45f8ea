/* pg_hold_schema.h: the PostgreSQL catalog's retention pins (store/hold.h),
 * a migration of pg_schema.h's PG_MIGRATIONS.
 *
 *   gt_retention_pins  as SQLite's retention_pins (store_schema.h): one
 *                      service or session, a window [from_ns, to_ns), a
 *                      reason, created and expires (unix ns).
 *   gt_held(session_id, start_ns, end_ns)
 *                      true when a live pin holds that generation; every
 *                      retention DELETE (pg_cat.c) adds NOT gt_held(...),
 *                      so a pin made through any daemon keeps the rows
 *                      from a retention pass run by any other. "Live" is
 *                      judged at the transaction's start (now()), one
 *                      instant for the whole pass.
 */
#ifndef PG_HOLD_SCHEMA_H
#define PG_HOLD_SCHEMA_H

#define PG_MIGRATION_HOLDS                                                     \
  "CREATE TABLE gt_retention_pins("                                            \
  " id bigserial PRIMARY KEY,"                                                 \
  " service text, session text,"                                               \
  " from_ns bigint NOT NULL, to_ns bigint NOT NULL,"                           \
  " reason text NOT NULL,"                                                     \
  " created_ns bigint NOT NULL, expires_ns bigint NOT NULL,"                   \
  " CHECK ((service IS NULL) <> (session IS NULL)));"                          \
  "CREATE FUNCTION gt_held(sid bigint, s bigint, e bigint) RETURNS boolean"    \
  " LANGUAGE sql STABLE AS $$ SELECT EXISTS (SELECT 1 FROM"                    \
  " gt_retention_pins hp JOIN gt_sessions hs ON hs.id = sid"                   \
  " WHERE hp.expires_ns > (extract(epoch from now()) * 1e9)::bigint"           \
  " AND hp.from_ns < e AND hp.to_ns > s"                                       \
  " AND (hp.session = hs.session OR hp.service = hs.service)) $$;"

#endif /* PG_HOLD_SCHEMA_H */
