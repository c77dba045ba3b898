ALTER TABLE "api_keys" ADD COLUMN "access" jsonb;
