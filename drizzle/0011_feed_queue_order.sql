-- A sequencing pass takes the oldest queue entries by this index instead of joining the whole queue
-- with the outbox; entries waiting now take their notification's created_at.
ALTER TABLE "feed_queue" ADD COLUMN "created_at" timestamp (3) with time zone;--> statement-breakpoint
UPDATE "feed_queue" q SET "created_at" = n."created_at" FROM "notifications" n WHERE n."id" = q."notification_id";--> statement-breakpoint
UPDATE "feed_queue" SET "created_at" = now() WHERE "created_at" IS NULL;--> statement-breakpoint
ALTER TABLE "feed_queue" ALTER COLUMN "created_at" SET NOT NULL;--> statement-breakpoint
CREATE INDEX "feed_queue_order_idx" ON "feed_queue" USING btree ("created_at","notification_id");
