-- Timestream's time-series functions. Expected values are computed by hand from the
-- fixture (devops.cpu: usage_user of h1 at step k, one minute apart from 21:13:20, is
-- (k mod 7) + 0.5; usage_system is k mod 5) or come from Timestream's documentation.
-- Steps 5..8 of h1: 5.5, 6.5, 0.5, 1.5, one minute apart. Per minute: +1, -6, +1 (per 5m: 5, -30, 5).
SELECT derivative_linear(create_time_series(time, usage_user), 1m) AS per_minute, derivative_linear(create_time_series(time, usage_user), 5m) AS per_5m, non_negative_derivative_linear(create_time_series(time, usage_user), 1m) AS rising
FROM devops.cpu WHERE hostname = 'h1' AND time >= from_milliseconds(1699996700000) AND time < from_milliseconds(1699996940000);

-- Trapezoids (5.5+6.5)/2 + (6.5+0.5)/2 + (0.5+1.5)/2 = 10.5 value-minutes: 630 per second (the default), 10.5 per minute, 0.175 per hour.
SELECT integral_trapezoidal(create_time_series(time, usage_user)) AS per_second, integral_trapezoidal(create_time_series(time, usage_user), 1m) AS per_minute, integral_trapezoidal(create_time_series(time, usage_user), 1h) AS per_hour
FROM devops.cpu WHERE hostname = 'h1' AND time >= from_milliseconds(1699996700000) AND time < from_milliseconds(1699996940000);

-- One point has no derivative and no integral; a BIGINT series works too (procs: 100 at step 0, 110 at step 10, 120 at step 20: +10 per 10 minutes).
SELECT derivative_linear(create_time_series(time, usage_user), 1m) AS one_point, integral_trapezoidal(create_time_series(time, usage_user)) AS no_area
FROM devops.cpu WHERE hostname = 'h1' AND time < from_milliseconds(1699996460000);

SELECT derivative_linear(create_time_series(time, procs), 10m) AS procs_rate, integral_trapezoidal(create_time_series(time, procs), 10m) AS procs_area
FROM devops.cpu WHERE hostname = 'h1' AND procs IS NOT NULL;

-- Steps 0..6 of h1: x = usage_user = 0.5..6.5, y = usage_system = 0 1 2 3 4 0 1.
-- Pearson: sxy = 3, sxx = 28, syy = 96/7, so 3 / sqrt(384) = 0.153093108923948(65).
-- Spearman (y ranks 1.5 3.5 5 6 7 1.5 3.5): 4 / sqrt(28 * 27) = 0.14547859349066158.
-- Kendall tau-b: 12 concordant, 7 discordant, 2 pairs tied in y of 21: 5 / sqrt(21 * 19) = 0.25031308716087947.
-- A series with itself (Timestream's example): 1.
SELECT correlate_pearson(create_time_series(time, usage_user), create_time_series(time, usage_system)) AS pearson, correlate_spearman(create_time_series(time, usage_user), create_time_series(time, usage_system)) AS spearman, correlate_kendall(create_time_series(time, usage_user), create_time_series(time, usage_system)) AS kendall, correlate_pearson(create_time_series(time, usage_user), create_time_series(time, usage_user)) AS itself
FROM devops.cpu WHERE hostname = 'h1' AND time < from_milliseconds(1699996820000);

-- Series of two hosts pair on equal timestamps (h2's usage_user is h1's + 10, so 1); a constant series has no coefficient.
WITH s AS (SELECT hostname, create_time_series(time, usage_user) AS user_series, create_time_series(time, usage_user * 0 + 1) AS flat FROM devops.cpu WHERE time < from_milliseconds(1699996820000) GROUP BY hostname)
SELECT correlate_pearson(a.user_series, b.user_series) AS h1_h2, correlate_kendall(a.user_series, b.user_series) AS h1_h2_kendall, correlate_pearson(a.user_series, a.flat) AS with_constant
FROM s a, s b WHERE a.hostname = 'h1' AND b.hostname = 'h2';

-- The natural cubic spline through (0 s, 0), (1 s, 1), (2 s, 0): m1 = -3, so 0.6875 at 0.5 s and 1.5 s; times outside the readings are left out.
WITH s AS (SELECT create_time_series(t, v) AS series FROM (VALUES (TIMESTAMP '2024-01-01 00:00:00', 0.0), (TIMESTAMP '2024-01-01 00:00:01', 1.0), (TIMESTAMP '2024-01-01 00:00:02', 0.0)) AS r(t, v))
SELECT interpolate_spline_cubic(series, sequence(TIMESTAMP '2024-01-01 00:00:00', TIMESTAMP '2024-01-01 00:00:03', 500ms)) AS spline FROM s;

-- One timestamp: the DOUBLE there, NULL where the array form leaves it out.
WITH s AS (SELECT create_time_series(t, v) AS series FROM (VALUES (TIMESTAMP '2024-01-01 00:00:00', 0.0), (TIMESTAMP '2024-01-01 00:00:01', 1.0), (TIMESTAMP '2024-01-01 00:00:02', 0.0)) AS r(t, v))
SELECT interpolate_spline_cubic(series, TIMESTAMP '2024-01-01 00:00:00.500') AS spline, interpolate_linear(series, TIMESTAMP '2024-01-01 00:00:00.500') AS linear, interpolate_locf(series, TIMESTAMP '2024-01-01 00:00:05') AS locf, interpolate_fill(series, TIMESTAMP '2024-01-01 00:00:00.500', -1.0) AS fill, interpolate_linear(series, TIMESTAMP '2024-01-01 00:00:05') AS outside, interpolate_locf(series, TIMESTAMP '2023-12-31 23:59:59') AS before
FROM s;

-- Timestream's example 7 (AWS samples): cubic spline of 30 s bins onto a 15 s grid, for h1's first three minutes (0.5, 1.5, 2.5 at 21:13:00, 21:14:00, 21:15:00 bins: a straight line, so the spline is too).
WITH binned AS (SELECT hostname, bin(time, 30s) AS binned_timestamp, ROUND(AVG(usage_user), 2) AS avg_cpu FROM devops.cpu WHERE hostname = 'h1' AND time < from_milliseconds(1699996580000) GROUP BY hostname, bin(time, 30s))
SELECT hostname, INTERPOLATE_SPLINE_CUBIC(CREATE_TIME_SERIES(binned_timestamp, avg_cpu), SEQUENCE(min(binned_timestamp), max(binned_timestamp), 15s)) AS interpolated FROM binned GROUP BY hostname;

-- Three readings on a line (0.5, 1.5, 2.5 a minute apart): the spline is the line, 1.0 half way.
SELECT interpolate_spline_cubic(create_time_series(time, usage_user), sequence(from_milliseconds(1699996400000), from_milliseconds(1699996460000), 30s)) AS on_a_line FROM devops.cpu WHERE hostname = 'h1' AND time < from_milliseconds(1699996560000);

-- filter and reduce (Timestream's examples, over steps 0..6 of h3: 20.5 .. 26.5).
WITH time_series_view AS (SELECT min(time) AS oldest_time, create_time_series(time, usage_user) AS cpu_user FROM devops.cpu WHERE hostname = 'h3' AND time < from_milliseconds(1699996820000) GROUP BY hostname)
SELECT FILTER(cpu_user, x -> x.value > 24.0) AS above, FILTER(cpu_user, x -> x.value < 25 AND x.time > oldest_time + 1m) AS low_later, FILTER(cpu_user, x -> x.value > 100) AS none FROM time_series_view;

-- Sum of squares: 20.5² + … + 26.5² = 3893.75; count above 24: 3 of 7; mean 23.5; fraction above 24: 3/7 = 0.4286.
WITH time_series_view AS (SELECT create_time_series(time, usage_user) AS cpu_user FROM devops.cpu WHERE hostname = 'h3' AND time < from_milliseconds(1699996820000) GROUP BY hostname)
SELECT REDUCE(cpu_user, DOUBLE '0.0', (s, x) -> x.value * x.value + s, s -> s) AS sum_squares, REDUCE(FILTER(cpu_user, x -> x.value > 24.0), 0, (s, x) -> s + 1, s -> s) AS count_above, REDUCE(cpu_user, 0, (s, x) -> s + x.value, s -> s / 7) AS mean, ROUND(REDUCE(cpu_user, CAST(ROW(0, 0) AS ROW(count_high BIGINT, count_total BIGINT)), (s, x) -> CAST(ROW(s.count_high + IF(x.value > 24.0, 1, 0), s.count_total + 1) AS ROW(count_high BIGINT, count_total BIGINT)), s -> IF(s.count_total = 0, NULL, CAST(s.count_high AS DOUBLE) / s.count_total)), 4) AS fraction_above
FROM time_series_view;

-- Trino's reduce examples: 75, NULL (a NULL element), 75, 2147483648, and 10.25 (a ROW state).
SELECT reduce(make_array(5, 20, 50), 0, (s, x) -> s + x, s -> s) AS a, reduce(make_array(5, 20, NULL, 50), 0, (s, x) -> s + x, s -> s) AS b, reduce(make_array(5, 20, NULL, 50), 0, (s, x) -> s + coalesce(x, 0), s -> s) AS c, reduce(make_array(2147483647, 1), BIGINT '0', (s, x) -> s + x, s -> s) AS d;

SELECT reduce(make_array(5, 6, 10, 20), CAST(ROW(0.0, 0) AS ROW(sum DOUBLE, count INTEGER)), (s, x) -> CAST(ROW(x + s.sum, s.count + 1) AS ROW(sum DOUBLE, count INTEGER)), s -> IF(s.count = 0, NULL, s.sum / s.count)) AS avg;

-- CROSS JOIN UNNEST: one series per host, back to rows (steps 0..2).
WITH per_host AS (SELECT hostname, create_time_series(time, usage_user) AS series FROM devops.cpu WHERE time < from_milliseconds(1699996580000) GROUP BY hostname)
SELECT hostname, t.tm, t.cpu FROM per_host CROSS JOIN UNNEST(series) AS t (tm, cpu) ORDER BY hostname, t.tm;

-- Without column aliases the columns are time and value; the comma form is the same join.
WITH per_host AS (SELECT hostname, create_time_series(time, usage_user) AS series FROM devops.cpu WHERE time < from_milliseconds(1699996580000) GROUP BY hostname)
SELECT hostname, avg(value) AS mean, min(time) AS first FROM per_host CROSS JOIN UNNEST(series) GROUP BY hostname ORDER BY hostname;

WITH per_host AS (SELECT hostname, create_time_series(time, usage_user) AS series FROM devops.cpu WHERE time < from_milliseconds(1699996580000) GROUP BY hostname)
SELECT p.hostname, count(*) AS points, max(u.v) AS top FROM per_host p, UNNEST(p.series) AS u(tm, v) GROUP BY p.hostname ORDER BY p.hostname;

-- Timestream's documented example: interpolate 30 s bins onto a 15 s grid, then UNNEST (h1, steps 0..2: bins 21:13:00, 21:14:00, 21:15:00 hold 0.5, 1.5, 2.5).
WITH binned_timeseries AS (
SELECT hostname, BIN(time, 30s) AS binned_timestamp, ROUND(AVG(usage_user), 2) AS avg_cpu_utilization
FROM devops.cpu
WHERE hostname = 'h1' AND time < from_milliseconds(1699996580000)
GROUP BY hostname, BIN(time, 30s)
), interpolated_timeseries AS (
SELECT hostname,
    INTERPOLATE_LINEAR(
        CREATE_TIME_SERIES(binned_timestamp, avg_cpu_utilization),
            SEQUENCE(min(binned_timestamp), max(binned_timestamp), 15s)) AS interpolated_avg_cpu_utilization
FROM binned_timeseries
GROUP BY hostname
)
SELECT time, ROUND(value, 2) AS interpolated_cpu
FROM interpolated_timeseries
CROSS JOIN UNNEST(interpolated_avg_cpu_utilization) ORDER BY time;

-- Bad input names the function.
SELECT derivative_linear(create_time_series(time, measure_value::varchar), 1m) FROM devops.events WHERE measure_name = 'status';

SELECT integral_trapezoidal(create_time_series(time, usage_user), 'x') FROM devops.cpu;

SELECT correlate_pearson(create_time_series(time, usage_user)) FROM devops.cpu;

SELECT derivative_linear(create_time_series(time, usage_user), 1month) FROM devops.cpu;

SELECT interpolate_spline_cubic(create_time_series(time, usage_user), sequence(from_milliseconds(1699996400000), from_milliseconds(1699996460000), 30s)) FROM devops.cpu WHERE hostname = 'h1' AND time < from_milliseconds(1699996500000);

SELECT reduce(make_array(1, 2), 0, (s, x) -> s + x) FROM devops.cpu;

-- Duration literals: 12second, 21hour, 2d, 17s, 1ms and (a fraction) 1.5h.
SELECT 12second AS a, 21hour AS b, 2d AS c, 17s AS d, 1ms AS e, 1.5h AS f, 1year AS g, 8month AS h;

-- Units are singular, as in Timestream (2hours would otherwise read as 2 AS hours).
SELECT 2hours;

-- ago(d) is now() - d at the query's start: every use in a query agrees.
SELECT ago(21hour) = now() - 21hour AS ago_is_now_minus, ago(1h) = ago(1h) AS same_instant, now() - 2d < ago(1d) AS older, TIMESTAMP '2024-01-01 00:00:00' + 1.5h AS plus_fraction, TIMESTAMP '2024-01-01 00:00:00' - 12second AS minus;

-- bin's documented examples: 10:15:00, 00:00:00, 00:00:00 and 2022-05-28 00:00:00.
SELECT bin(TIMESTAMP '2022-06-17 10:15:20', 5m) AS five_minutes, bin(TIMESTAMP '2022-06-17 10:15:20', 1d) AS one_day, bin(TIMESTAMP '2022-06-17 10:15:20', 10day) AS ten_days, bin(TIMESTAMP '2022-06-17 10:15:20', 30day) AS thirty_days;
