CREATE TABLE "anchor_batches" (
	"id" uuid PRIMARY KEY NOT NULL,
	"network" text NOT NULL,
	"chain" text NOT NULL,
	"root" text NOT NULL,
	"leaf_count" integer NOT NULL,
	"state" text NOT NULL,
	"tx_id" text,
	"block_number" bigint,
	"block_hash" text,
	"anchored_at" timestamp (3) with time zone,
	"created_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "anchor_leaves" (
	"registry_id" uuid PRIMARY KEY NOT NULL,
	"account_id" uuid NOT NULL,
	"leaf" text NOT NULL,
	"salt" text,
	"subscription_id" uuid,
	"batch_id" uuid,
	"position" integer,
	"created_at" timestamp (3) with time zone NOT NULL
);
--> statement-breakpoint
CREATE TABLE "anchor_transactions" (
	"tx_id" text PRIMARY KEY NOT NULL,
	"batch_id" uuid NOT NULL,
	"network" text NOT NULL,
	"raw" text NOT NULL,
	"details" jsonb NOT NULL,
	"state" text NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL,
	"sent_at" timestamp (3) with time zone
);
--> statement-breakpoint
ALTER TABLE "registries" ADD COLUMN "revoked_at" timestamp (3) with time zone;--> statement-breakpoint
CREATE INDEX "anchor_batches_open_idx" ON "anchor_batches" USING btree ("network","created_at") WHERE state <> 'final';--> statement-breakpoint
CREATE INDEX "anchor_leaves_unbatched_idx" ON "anchor_leaves" USING btree ("registry_id") WHERE batch_id IS NULL;--> statement-breakpoint
CREATE INDEX "anchor_leaves_batch_idx" ON "anchor_leaves" USING btree ("batch_id","position");--> statement-breakpoint
CREATE INDEX "anchor_transactions_batch_idx" ON "anchor_transactions" USING btree ("batch_id");