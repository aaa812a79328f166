-- Timestream's metadata statements, in Timestream's shapes.
SHOW DATABASES;

SHOW TABLES FROM devops LIKE 'cpu_bucket%';

SHOW MEASURES FROM devops.events;

SHOW MEASURES FROM "devops"."cpu" LIKE 'c%';

DESCRIBE devops.cpu;

DESCRIBE "devops"."events";

DESCRIBE devops.nope;

SHOW TABLES FROM nope;

SHOW MEASURES FROM devops;
