-- The benchmark's three-step migration (scripts/bench-migration/) as plain SQL on the same
-- store, for the sqlite3 shell: the reference ckport's migrate apply is measured against.
BEGIN;
ALTER TABLE "Task" RENAME COLUMN "notes" TO "details";
ALTER TABLE "Task" ADD COLUMN "statusCode" INTEGER;
ALTER TABLE "Task" ADD COLUMN "dueLabel" TEXT;
ALTER TABLE "Task" ADD COLUMN "_schemaVersion" INTEGER;
UPDATE "Task" SET
  "statusCode" = CASE "status" WHEN 'backlog' THEN 0 WHEN 'next' THEN 1 WHEN 'done' THEN 2 ELSE 0 END,
  "dueLabel" = 'due ' || strftime('%Y-%m-%dT%H:%M:%fZ', coalesce("dueDate", "createdAt") / 1000.0, 'unixepoch'),
  "_schemaVersion" = 1;
CREATE INDEX "Task.statusCode" ON "Task" ("statusCode");
CREATE INDEX "Task._schemaVersion" ON "Task" ("_schemaVersion");
UPDATE "_ck_record" SET "seq" = "seq" + 100000000 WHERE "recordType" = 'Task';
COMMIT;
