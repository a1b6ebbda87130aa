CREATE TABLE "feed_events" (
	"seq" bigint PRIMARY KEY NOT NULL,
	"notification_id" uuid NOT NULL,
	"account_id" uuid NOT NULL,
	"subscription_id" uuid NOT NULL
);
--> statement-breakpoint
CREATE TABLE "feed_queue" (
	"notification_id" uuid PRIMARY KEY NOT NULL
);
--> statement-breakpoint
CREATE UNIQUE INDEX "feed_events_notification_idx" ON "feed_events" USING btree ("notification_id");--> statement-breakpoint
CREATE INDEX "feed_events_account_idx" ON "feed_events" USING btree ("account_id","seq");--> statement-breakpoint
CREATE INDEX "feed_events_subscription_idx" ON "feed_events" USING btree ("subscription_id","seq");--> statement-breakpoint
-- The notifications written before the feed existed enter it now, in the order they were made;
-- held ones join when released, cancelled ones never.
INSERT INTO "feed_events" ("seq", "notification_id", "account_id", "subscription_id")
SELECT row_number() OVER (ORDER BY "created_at", "id"), "id", "account_id", "subscription_id"
FROM "notifications" WHERE "state" IN ('pending', 'delivered', 'failed');
