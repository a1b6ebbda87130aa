-- Attempts are written only from their notification's own result statement, and notifications are never
-- deleted: the per-attempt check was up to a quarter of recording a result on PGlite.
ALTER TABLE "delivery_attempts" DROP CONSTRAINT "delivery_attempts_notification_id_notifications_id_fk";
