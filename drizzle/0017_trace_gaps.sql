CREATE TABLE "trace_gaps" (
	"network" text NOT NULL,
	"height" bigint NOT NULL,
	"hash" text NOT NULL,
	"reason" text NOT NULL,
	"since" timestamp (3) with time zone NOT NULL,
	"tries" integer DEFAULT 0 NOT NULL,
	"tried_at" timestamp (3) with time zone,
	CONSTRAINT "trace_gaps_network_height_hash_pk" PRIMARY KEY("network","height","hash")
);
--> statement-breakpoint
ALTER TABLE "backfills" ADD COLUMN "trace_gaps" integer DEFAULT 0 NOT NULL;