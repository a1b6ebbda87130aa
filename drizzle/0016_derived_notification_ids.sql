-- Chain notification ids become derived from the event (name-based UUIDs) and carry no order, so
-- the outbox gets a key of its own in insertion order, seq. Existing rows are numbered in the order
-- of their time-ordered ids, so the delivery log and the feed keep the order they had.
DROP INDEX "feed_queue_order_idx";--> statement-breakpoint
DROP INDEX "notifications_subscription_idx";--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "seq" bigint;--> statement-breakpoint
UPDATE "notifications" n SET "seq" = o."seq"
  FROM (SELECT "id", row_number() OVER (ORDER BY "id") AS "seq" FROM "notifications") o
  WHERE n."id" = o."id";--> statement-breakpoint
ALTER TABLE "notifications" ALTER COLUMN "seq" SET NOT NULL;--> statement-breakpoint
ALTER TABLE "notifications" ALTER COLUMN "seq" ADD GENERATED ALWAYS AS IDENTITY (sequence name "notifications_seq_seq" INCREMENT BY 1 MINVALUE 1 MAXVALUE 9223372036854775807 START WITH 1 CACHE 1);--> statement-breakpoint
SELECT setval('notifications_seq_seq', coalesce((SELECT max("seq") FROM "notifications"), 0) + 1, false);--> statement-breakpoint
ALTER TABLE "feed_queue" ADD COLUMN "seq" bigint;--> statement-breakpoint
UPDATE "feed_queue" q SET "seq" = n."seq" FROM "notifications" n WHERE n."id" = q."notification_id";--> statement-breakpoint
-- An entry without its notification is dropped by the sequencer anyway.
DELETE FROM "feed_queue" WHERE "seq" IS NULL;--> statement-breakpoint
ALTER TABLE "feed_queue" ALTER COLUMN "seq" SET NOT NULL;--> statement-breakpoint
CREATE INDEX "notifications_account_idx" ON "notifications" USING btree ("account_id","seq");--> statement-breakpoint
CREATE INDEX "feed_queue_order_idx" ON "feed_queue" USING btree ("created_at","seq");--> statement-breakpoint
CREATE INDEX "notifications_subscription_idx" ON "notifications" USING btree ("subscription_id","seq");
