-- Timestream's functions (Presto's), with Timestream's answers.
SELECT regexp_replace('a-b-c', '-', '+') AS all_matches, regexp_replace('a1b22', '[0-9]+') AS removed, regexp_replace('x=1', '(\w)=(\d)', '$2=$1') AS groups;

SELECT regexp_extract('user-42-7', '[0-9]+') AS first, regexp_extract('user-42-7', '([a-z]+)-([0-9]+)', 2) AS second_group, regexp_extract('none', '[0-9]+') AS no_match;

SELECT regexp_extract_all('a1b22c333', '[0-9]+') AS numbers, regexp_split('a1b22c', '[0-9]+') AS pieces;

SELECT date_format(TIMESTAMP '2019-12-04 19:05:09.123', '%Y-%m-%d %H:%i:%s') AS mysql, date_parse('2019/12/04 19:05', '%Y/%m/%d %H:%i') AS parsed;

SELECT to_unixtime(TIMESTAMP '2019-12-04 19:00:00.5') AS seconds, to_iso8601(TIMESTAMP '2019-12-04 19:00:00') AS iso, from_iso8601_timestamp('2019-12-04T21:00:00+02:00') AS ts, from_iso8601_date('2019-12-04') AS d;

SELECT date_add('hour', 3, TIMESTAMP '2019-12-04 22:00:00') AS later, date_add('month', 1, TIMESTAMP '2020-01-31 00:00:00') AS end_of_feb, date_diff('day', TIMESTAMP '2019-12-01 00:00:00', TIMESTAMP '2019-12-04 12:00:00') AS days, date_diff('month', TIMESTAMP '2020-01-31 00:00:00', TIMESTAMP '2020-02-29 00:00:00') AS months;

SELECT year(t) AS y, quarter(t) AS q, month(t) AS m, week(t) AS w, day(t) AS d, day_of_week(t) AS dow, day_of_year(t) AS doy, hour(t) AS h, minute(t) AS mi, second(t) AS s, millisecond(t) AS ms, last_day_of_month(t) AS last FROM (SELECT TIMESTAMP '2024-02-11 13:14:15.678' AS t);

SELECT element_at(make_array(10, 20, 30), 1) AS first, element_at(make_array(10, 20, 30), -1) AS last, element_at(map(['a', 'b'], [1, 2]), 'b') AS b;

SELECT if(1 < 2, 'yes', 'no') AS two, if(1 > 2, 'yes') AS one, mod(17, 5) AS m, sign(-3.5) AS s, truncate(2.7) AS t, levenshtein_distance('kitten', 'sitting') AS lev;

SELECT is_nan(nan()) AS n, is_finite(1.0) AS f, is_infinite(infinity()) AS i, current_timezone() AS tz;

SELECT count_if(x > 1) AS over_one, max_by(name, x) AS biggest, min_by(name, x) AS smallest, every(x > 0) AS all_positive, geometric_mean(x) AS gm, arbitrary(x) IS NOT NULL AS some FROM (VALUES ('a', 1.0), ('b', 4.0), ('c', 2.0), ('d', NULL)) AS v(name, x);

SELECT date_add('fortnight', 1, TIMESTAMP '2019-12-04 22:00:00');

SELECT regexp_extract('a', 'a', 3);

-- create_time_series of every measure type.
SELECT device, create_time_series(time, measure_value::double) AS temps FROM devops.events WHERE measure_name = 'temperature' GROUP BY device ORDER BY device;

SELECT create_time_series(time, measure_value::bigint) AS counts, arrow_typeof(create_time_series(time, measure_value::bigint)) AS t FROM devops.events WHERE measure_name = 'count';

SELECT create_time_series(time, measure_value::varchar) AS statuses FROM devops.events WHERE measure_name = 'status';

SELECT create_time_series(time, measure_value::boolean) AS online FROM devops.events WHERE measure_name = 'online';

SELECT create_time_series(time, measure_value::double) AS nothing FROM devops.events WHERE measure_name = 'nope';

SELECT if(true, 1, 0.5) AS mixed, mod(7.5, 2) AS fmod, mod(-7, 3) AS neg;

SELECT regexp_replace('10 20', '(\d+)', '$1px') AS px, regexp_replace('a', 'a', '\$') AS dollar, date_diff('month', TIMESTAMP '2020-01-31 00:00:00', TIMESTAMP '2020-02-29 00:00:00') AS jan_feb, date_diff('year', TIMESTAMP '2020-02-29 00:00:00', TIMESTAMP '2021-02-28 00:00:00') AS leap;

-- Joda-Time formats. Timestream's documented examples: '1968-01-13 12', and 10:10 PST is 18:10 UTC.
SELECT format_datetime(parse_datetime('1968-01-13 12', 'yyyy-MM-dd HH'), 'yyyy-MM-dd HH') AS round_trip, parse_datetime('2019-12-29 10:10 PST', 'uuuu-LL-dd HH:mm z') AS pst;

SELECT format_datetime(TIMESTAMP '2019-12-04 19:05:09.123456789', 'EEEE, d MMMM yyyy hh:mm:ss.SSS a ZZ ''week'' w, D') AS long_form, format_datetime(TIMESTAMP '2019-12-04 19:05:09', 'G yy MMM E k K z') AS short_form;

SELECT parse_datetime('04/Dec/2019:19:05:09 +0100', 'dd/MMM/yyyy:HH:mm:ss Z') AS clf, parse_datetime('20191204T190509.5', 'yyyyMMdd''T''HHmmss.S') AS compact, parse_datetime('2019-07-01 10:00 America/Los_Angeles', 'yyyy-MM-dd HH:mm ZZZ') AS named_zone;

SELECT format_datetime(TIMESTAMP '2019-12-04 19:05:09', 'yyyy QQ');

SELECT parse_datetime('2019-02-30', 'yyyy-MM-dd');

-- parse_duration: Timestream's example 42.8ms is 0 00:00:00.042800000 (an interval day to second); Trino's 3.81 d is 3 19:26:24.
SELECT parse_duration('42.8ms') AS ms, parse_duration('3.81 d') AS days, parse_duration('1day') AS one_day, parse_duration('5m') AS five_minutes, arrow_typeof(parse_duration('1h')) AS t, TIMESTAMP '2024-01-01 00:00:00' + parse_duration('1.5h') AS later;

SELECT parse_duration('1 week');

-- to_base / from_base (Trino's MathFunctions: Java's Long.toString and Long.parseLong).
SELECT to_base(255, 16) AS ff, to_base(-10, 2) AS minus_ten, to_base(35, 36) AS z, from_base('ff', 16) AS hex, from_base('-1010', 2) AS bin, from_base('ZZ', 36) AS upper;

SELECT to_base(10, 1);

SELECT from_base('0x1f', 16);

-- Bitwise functions: Timestream's documented examples (3, 4, -13, 15, 11) and Trino's shifts (4, 1, 0, -1).
SELECT bit_count(19, 8) AS bits, bitwise_and(12, 7) AS a, bitwise_not(12) AS n, bitwise_or(12, 7) AS o, bitwise_xor(12, 7) AS x, bitwise_left_shift(1, 2) AS l, bitwise_right_shift(8, 3) AS r, bitwise_right_shift(-45, 64) AS r64, bitwise_right_shift_arithmetic(-45, 64) AS a64;

SELECT bit_count(19, 2);

SELECT bitwise_and('a', 1);
