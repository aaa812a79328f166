-- Timestream tables in the flat model, with Timestream's functions.
SELECT hostname, region, measure_name, time, usage_user, usage_system, procs
FROM devops.cpu WHERE hostname = 'h1' ORDER BY time LIMIT 3;

SELECT hostname, count(*) AS points, max(usage_user) AS max_user FROM "devops"."cpu" GROUP BY hostname ORDER BY hostname;

SELECT bin(time, 10m) AS t, avg(usage_user) AS mean
FROM devops.cpu WHERE hostname = 'h2' AND time >= from_milliseconds(1699996400000) AND time < from_milliseconds(1699998200000)
GROUP BY 1 ORDER BY 1;

SELECT count(*) FROM devops.cpu WHERE region = 'eu' AND measure_name = 'cpu';

SELECT count(*) FROM devops.cpu WHERE time BETWEEN from_milliseconds(1699996400000) AND from_milliseconds(1699996700000);

SELECT count(*) FROM devops.cpu WHERE time > ago(1000d);

SELECT count(*) FROM devops.cpu WHERE time > ago(100000d) AND time <= now();

SELECT to_milliseconds(max(time)) AS newest_ms FROM devops.cpu;

SELECT date_trunc('hour', time) AS hour, count(DISTINCT hostname) AS hosts FROM devops.cpu GROUP BY 1 ORDER BY 1;

SELECT approx_percentile(usage_user, 0.5) AS median FROM devops.cpu WHERE hostname = 'h3';

SELECT device, measure_name, measure_value::double, measure_value::bigint, measure_value::varchar, measure_value::boolean
FROM devops.events ORDER BY time;

SELECT device, avg(measure_value::double) FROM devops.events WHERE measure_name = 'temperature' GROUP BY device ORDER BY device;

SELECT hostname, max(time) AS last FROM devops.cpu GROUP BY hostname ORDER BY hostname;

SELECT count(*) FROM devops.nope;

SELECT count(*) FROM nodb.cpu;

SELECT no_such_column FROM devops.cpu;
SELECT hostname, count(*) FROM devops.cpu WHERE hostname IN ('h3', 'h1', 'nope') AND time < from_milliseconds(1699996700000) GROUP BY hostname ORDER BY hostname;

SELECT count(*) FROM devops.events WHERE measure_name IN ('count', 'status');


SELECT device, create_time_series(time, measure_value::double) AS series FROM devops.events WHERE measure_name = 'temperature' GROUP BY device ORDER BY device;

SELECT unnest(interpolate_linear(create_time_series(time, usage_user), sequence(from_milliseconds(1699996400000), from_milliseconds(1699996580000), 30s))) AS point
FROM devops.cpu WHERE hostname = 'h1' AND time < from_milliseconds(1699996600000);

SELECT hostname, interpolate_locf(create_time_series(time, usage_user), sequence(from_milliseconds(1699996390000), from_milliseconds(1699996480000), 45s)) AS filled
FROM devops.cpu WHERE hostname IN ('h1', 'h2') AND time < from_milliseconds(1699996600000) GROUP BY hostname ORDER BY hostname;

SELECT interpolate_fill(create_time_series(time, usage_user), sequence(from_milliseconds(1699996400000), from_milliseconds(1699996490000), 30s), -1.0) AS filled
FROM devops.cpu WHERE hostname = 'h3' AND time < from_milliseconds(1699996600000);
SELECT abs(to_nanoseconds(now()) - to_nanoseconds(ago(1h)) - 3600000000000) < 1000000000 AS about_an_hour;
