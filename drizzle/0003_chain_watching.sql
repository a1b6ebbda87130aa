CREATE TABLE "chain_cursors" (
	"network" text PRIMARY KEY NOT NULL,
	"height" bigint NOT NULL,
	"hash" text NOT NULL,
	"updated_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "chain_headers" (
	"network" text NOT NULL,
	"height" bigint NOT NULL,
	"hash" text NOT NULL,
	"parent_hash" text NOT NULL,
	CONSTRAINT "chain_headers_network_height_pk" PRIMARY KEY("network","height")
);
--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "chain" text;--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "block_number" bigint;--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "block_hash" text;--> statement-breakpoint
ALTER TABLE "notifications" ADD COLUMN "release_height" bigint;--> statement-breakpoint
CREATE INDEX "notifications_block_idx" ON "notifications" USING btree ("chain","block_hash") WHERE chain IS NOT NULL;--> statement-breakpoint
CREATE INDEX "notifications_held_idx" ON "notifications" USING btree ("chain","release_height") WHERE state = 'held';