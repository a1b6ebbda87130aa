-- EVM subscriptions with attr.fees also get a "fee" notification for each mined transaction their address sent.
ALTER TABLE "subscriptions" ADD COLUMN "fees" boolean DEFAULT false NOT NULL;