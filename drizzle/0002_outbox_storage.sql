-- The outbox is updated twice per delivery (claim, result). Free space in each page lets the
-- claim's update stay on the page (a HOT update, no index writes), and analysing after a few
-- percent of change keeps the claim query on its index after bursts of inserts.
ALTER TABLE "notifications" SET (fillfactor = 70, autovacuum_analyze_scale_factor = 0.02, autovacuum_vacuum_scale_factor = 0.05);
