CREATE TABLE "subscription_addresses" (
	"subscription_id" uuid NOT NULL,
	"network" text NOT NULL,
	"address" text NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "subscription_addresses_subscription_id_address_pk" PRIMARY KEY("subscription_id","address")
);
--> statement-breakpoint
-- Every address subscription made before lists existed watches its one address.
INSERT INTO "subscription_addresses" ("subscription_id", "network", "address", "created_at")
SELECT "id", "network", "address", "created_at" FROM "subscriptions"
WHERE "type" = 'ADDRESS_TRANSACTION' AND "network" IS NOT NULL AND "address" IS NOT NULL;
--> statement-breakpoint
-- How many addresses a subscription watches, kept by the statements that change them: the view
-- shows it without counting a million rows, and the watchers size their tables from it.
ALTER TABLE "subscriptions" ADD COLUMN "address_count" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
UPDATE "subscriptions" SET "address_count" = 1
WHERE "type" = 'ADDRESS_TRANSACTION' AND "network" IS NOT NULL AND "address" IS NOT NULL;--> statement-breakpoint
-- Subscription changes too large for a NOTIFY payload (8000 bytes), read by the watchers of other
-- processes by the sequence number the payload carries; kept for minutes only.
CREATE TABLE "subscription_changes" (
	"seq" bigserial PRIMARY KEY NOT NULL,
	"change" text NOT NULL,
	"created_at" timestamp (3) with time zone DEFAULT now() NOT NULL
);
