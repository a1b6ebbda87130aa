-- CONTRACT_LOG_EVENT subscriptions: the event followed (ABI, compiled filter, any contract or a list).
ALTER TABLE "subscriptions" ADD COLUMN "contract_event" jsonb;