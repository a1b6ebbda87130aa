CREATE TABLE "subscription_addresses" (
	"subscription_id" uuid NOT NULL,
	"network" text NOT NULL,
	"address" text NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "subscription_addresses_subscription_id_address_pk" PRIMARY KEY("subscription_id","address")
);
--> statement-breakpoint
ALTER TABLE "subscription_addresses" ADD CONSTRAINT "subscription_addresses_subscription_id_subscriptions_id_fk" FOREIGN KEY ("subscription_id") REFERENCES "public"."subscriptions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE INDEX "subscription_addresses_watch_idx" ON "subscription_addresses" USING btree ("network","address");--> statement-breakpoint
-- Every address subscription made before lists existed watches its one address.
INSERT INTO "subscription_addresses" ("subscription_id", "network", "address", "created_at")
SELECT "id", "network", "address", "created_at" FROM "subscriptions"
WHERE "type" = 'ADDRESS_TRANSACTION' AND "network" IS NOT NULL AND "address" IS NOT NULL;
