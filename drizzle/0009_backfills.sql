CREATE TABLE "backfills" (
	"id" uuid PRIMARY KEY NOT NULL,
	"account_id" uuid NOT NULL,
	"subscription_id" uuid NOT NULL,
	"network" text NOT NULL,
	"from_height" bigint NOT NULL,
	"to_height" bigint NOT NULL,
	"position" bigint NOT NULL,
	"found" integer DEFAULT 0 NOT NULL,
	"state" text NOT NULL,
	"error" text,
	"requested_from" text NOT NULL,
	"requested_to" text,
	"created_at" timestamp (3) with time zone NOT NULL,
	"started_at" timestamp (3) with time zone,
	"started_position" bigint,
	"updated_at" timestamp (3) with time zone NOT NULL,
	"finished_at" timestamp (3) with time zone
);
--> statement-breakpoint
ALTER TABLE "backfills" ADD CONSTRAINT "backfills_account_id_accounts_id_fk" FOREIGN KEY ("account_id") REFERENCES "public"."accounts"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
ALTER TABLE "backfills" ADD CONSTRAINT "backfills_subscription_id_subscriptions_id_fk" FOREIGN KEY ("subscription_id") REFERENCES "public"."subscriptions"("id") ON DELETE cascade ON UPDATE no action;--> statement-breakpoint
CREATE UNIQUE INDEX "backfills_one_running_idx" ON "backfills" USING btree ("subscription_id") WHERE state = 'running';--> statement-breakpoint
CREATE INDEX "backfills_subscription_idx" ON "backfills" USING btree ("subscription_id","created_at");--> statement-breakpoint
CREATE INDEX "backfills_running_idx" ON "backfills" USING btree ("state") WHERE state = 'running';
