-- The same query answers the same on every storage pattern; the storage counters show
-- what each pattern reads for it.
SELECT hostname, count(*) AS n, sum(usage_user) AS s FROM devops.cpu WHERE hostname = 'h2' AND time >= from_milliseconds(1699997000000) GROUP BY hostname;

SELECT hostname, count(*) AS n, sum(usage_user) AS s FROM devops.cpu_bucket_cells WHERE hostname = 'h2' AND time >= from_milliseconds(1699997000000) GROUP BY hostname;

SELECT hostname, count(*) AS n, sum(usage_user) AS s FROM devops.cpu_bucket_columns WHERE hostname = 'h2' AND time >= from_milliseconds(1699997000000) GROUP BY hostname;

SELECT hostname, count(*) AS n, sum(usage_user) AS s FROM devops.cpu_row_columns WHERE hostname = 'h2' AND time >= from_milliseconds(1699997000000) GROUP BY hostname;

SELECT region, count(*) FROM devops.cpu_bucket_cells GROUP BY region ORDER BY region;
