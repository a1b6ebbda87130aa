ALTER TABLE "subscriptions" ADD COLUMN "previous_secrets" jsonb DEFAULT '[]'::jsonb NOT NULL;--> statement-breakpoint
ALTER TABLE "subscriptions" ADD COLUMN "secret_version" integer DEFAULT 0 NOT NULL;--> statement-breakpoint
-- A secret rotated out before this migration keeps signing until its overlap ends.
UPDATE "subscriptions"
SET "previous_secrets" = jsonb_build_array(jsonb_build_object(
      'secret', "previous_secret",
      'expiresAt', to_char("previous_secret_expires_at" AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))),
    "secret_version" = 1
WHERE "previous_secret" IS NOT NULL AND "previous_secret_expires_at" > now();--> statement-breakpoint
ALTER TABLE "subscriptions" DROP COLUMN "previous_secret";--> statement-breakpoint
ALTER TABLE "subscriptions" DROP COLUMN "previous_secret_expires_at";--> statement-breakpoint
CREATE INDEX "notifications_failed_idx" ON "notifications" USING btree ("subscription_id","created_at") WHERE state = 'failed';
