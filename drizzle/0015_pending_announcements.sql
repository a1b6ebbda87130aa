-- Pending announcements that may still be withdrawn with dropped: true (issue 31): one row per
-- pending notification whose transaction has not been seen in a block.
CREATE TABLE "pending_announcements" (
	"notification_id" uuid PRIMARY KEY NOT NULL,
	"network" text NOT NULL,
	"tx_id" text NOT NULL,
	"claims" text[] NOT NULL,
	"announced_at" timestamp (3) with time zone NOT NULL,
	"missing_since" timestamp (3) with time zone
);
--> statement-breakpoint
CREATE INDEX "pending_announcements_network_idx" ON "pending_announcements" USING btree ("network","tx_id");