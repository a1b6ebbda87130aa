CREATE TABLE "transaction_cache" (
	"network" text NOT NULL,
	"tx_id" text NOT NULL,
	"body" text NOT NULL,
	"created_at" timestamp (3) with time zone NOT NULL,
	CONSTRAINT "transaction_cache_network_tx_id_pk" PRIMARY KEY("network","tx_id")
);
