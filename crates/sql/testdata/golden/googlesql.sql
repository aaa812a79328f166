-- GoogleSQL for Bigtable as Google's documentation writes it: row keys and values are BYTES.
SELECT _key FROM users WHERE STARTS_WITH(_key, 'user#00') ORDER BY _key LIMIT 2;

SELECT count(*) AS n FROM users WHERE ENDS_WITH(_key, b'5') OR STARTS_WITH(info['name'], 'gr');

SELECT CAST(_key AS STRING) AS k, SPLIT(_key, '#') AS parts, LENGTH(_key) AS len, BYTE_LENGTH(info['name']) AS name_len FROM users WHERE _key = 'user#002';

SELECT UPPER(info['name']) AS upper_name, LOWER(b'MiXeD') AS lower_bytes, SUBSTR(info['city'], 2, 3) AS sub, SUBSTR(info['city'], -3) AS tail FROM users WHERE _key = 'user#003';

SELECT REPLACE(_key, '#', '::') AS replaced, CONCAT(info['name'], b'@', info['city']) AS joined, TO_HEX(info['age']) AS age_hex, TO_BASE64(info['name']) AS name_b64 FROM users WHERE _key = 'user#001';

SELECT REGEXP_CONTAINS(info['city'], 'ing') AS has_ing, REGEXP_EXTRACT(_key, '#(\d+)') AS number FROM users ORDER BY _key;

SELECT TO_INT64(info['age']) AS age, TO_FLOAT64(info['score']) AS score FROM users WHERE TO_INT64(info['age']) BETWEEN 35 AND 50 ORDER BY age;

SELECT TO_INT64(info['name']) FROM users WHERE _key = 'user#001';

SELECT FROM_BASE64('YWRh') AS b, FROM_HEX('61') AS h, SAFE_CONVERT_BYTES_TO_STRING(FROM_HEX('ff61')) AS s;

SELECT SPLIT('a,b,,c') AS default_comma, SPLIT('abc', '') AS chars, REGEXP_EXTRACT('user-42', '[0-9]+') AS digits;

SELECT SPLIT(_key) FROM users;

-- Strings stay DataFusion's.
SELECT starts_with('almanac', 'alm') AS s, length('été') AS chars, upper('abc') AS u, concat('a', NULL, 'b') AS c;

-- GoogleSQL's table arguments.
SELECT _key, info['city'] FROM users(with_history => TRUE, latest_n => 1) WHERE _key = 'user#001';

SELECT _key, info['city'] FROM users(with_history => TRUE, before => TIMESTAMP '2023-11-14T22:13:00Z') WHERE _key < 'user#003';

SELECT _key, info['city'] FROM users(with_history => TRUE, after => TIMESTAMP '2023-11-14T22:13:00Z') WHERE _key = 'user#001';

SELECT CAST(info['city'] AS STRING) AS city FROM users(as_of => TIMESTAMP '2023-11-14T22:13:00Z');

SELECT _key FROM users(latest_n => 2);

SELECT _key FROM users(with_history => TRUE, as_of => TIMESTAMP '2023-11-14T22:13:00Z');

SELECT _key FROM users(with_history => TRUE, latest_n => 0);

-- UNPACK: one row per timestamp, newest first, with _timestamp after _key.
SELECT * FROM UNPACK((SELECT _key, info FROM users(with_history => TRUE) WHERE _key < 'user#003'));

SELECT _key, _timestamp, CAST(info['city'] AS STRING) AS city FROM UNPACK((SELECT * FROM users(with_history => TRUE, latest_n => 2))) WHERE _key = 'user#001' ORDER BY _timestamp;

SELECT _key, _timestamp, city FROM UNPACK((SELECT _key, info['city'] AS city FROM users(with_history => TRUE))) AS u WHERE u._key = 'user#001';

SELECT count(*) AS versions FROM unpack((SELECT info FROM users(with_history => TRUE)));

SELECT * FROM UNPACK((SELECT _key FROM users));

-- Arrays count from 0, as in GoogleSQL; SELECT * has no _timestamp.
SELECT SPLIT(_key, '#')[0] AS kind, SPLIT(_key, '#')[OFFSET(1)] AS id, SPLIT(_key, '#')[ORDINAL(1)] AS first, SPLIT(_key, '#')[SAFE_OFFSET(5)] AS none FROM users WHERE _key = 'user#004';

SELECT SPLIT(_key, '#')[OFFSET(2)] FROM users WHERE _key = 'user#004';

SELECT SPLIT(_key, '#')[ORDINAL(0)] FROM users WHERE _key = 'user#004';

SELECT SPLIT(_key, '#')[-1] FROM users WHERE _key = 'user#004';

SELECT SPLIT(_key, '#')[SAFE_ORDINAL(3)] AS none FROM users WHERE _key = 'user#004';

SELECT * FROM users WHERE _key = 'user#005';

SELECT * EXCLUDE (counts) FROM users WHERE _key = 'user#005';

SELECT _key, _timestamp FROM users WHERE _key = 'user#005';

WITH k AS (SELECT _key, _timestamp FROM users WHERE _key = 'user#005') SELECT * FROM k;

SELECT * FROM generate_series(1, 2);

SELECT * FROM (SELECT * FROM users WHERE _key = 'user#001') UNION ALL (SELECT * FROM users WHERE _key = 'user#002') ORDER BY _key;

-- GoogleSQL's type names in CAST, and its division.
SELECT CAST('42' AS INT64) AS i, SAFE_CAST('x' AS INT64) AS bad, CAST('1.5' AS FLOAT64) AS f, CAST('ab' AS BYTES) AS b, 5 / 2 AS half, 6 / 3 AS two;

-- Timestamps and dates.
SELECT TIMESTAMP_MILLIS(1700000000123) AS ms, UNIX_MILLIS(TIMESTAMP '2023-11-14T22:13:20.123Z') AS back, UNIX_SECONDS(TIMESTAMP_SECONDS(-1)) AS neg;

SELECT TIMESTAMP_TRUNC(TIMESTAMP '2024-03-13T10:20:30Z', HOUR) AS h, TIMESTAMP_TRUNC(TIMESTAMP '2024-03-13T10:20:30Z', WEEK) AS sunday, TIMESTAMP_TRUNC(TIMESTAMP '2024-03-13T10:20:30Z', ISOWEEK) AS monday, TIMESTAMP_TRUNC(TIMESTAMP '2024-03-13T10:20:30Z', DAY, 'America/Los_Angeles') AS la_day;

SELECT TIMESTAMP_DIFF(TIMESTAMP '2024-03-13T10:00:00Z', TIMESTAMP '2024-03-12T09:30:00Z', HOUR) AS hours, TIMESTAMP_DIFF(TIMESTAMP '2024-03-12T09:30:00Z', TIMESTAMP '2024-03-13T10:00:00Z', DAY) AS days;

SELECT TIMESTAMP_ADD(TIMESTAMP '2024-01-31T00:00:00Z', INTERVAL 1 MONTH) AS plus_month, TIMESTAMP_SUB(TIMESTAMP '2024-01-01T00:00:00Z', INTERVAL 90 MINUTE) AS minus;

SELECT FORMAT_TIMESTAMP('%Y-%m-%d %H:%M:%E3S %Ez Q%Q', TIMESTAMP '2024-03-13T10:20:30.123456Z', '+05:30') AS f, PARSE_TIMESTAMP('%Y/%m/%d %H:%M', '2024/03/13 10:20') AS p, TIMESTAMP('2008-12-25 15:30:00+00') AS t, TIMESTAMP('2008-12-25 15:30:00', 'America/Los_Angeles') AS la;

SELECT DATE(2024, 2, 29) AS d, DATE_DIFF(DATE '2024-03-01', DATE '2023-12-31', MONTH) AS months, DATE_DIFF(DATE '2024-03-10', DATE '2024-03-09', WEEK) AS weeks, DATE_TRUNC(DATE '2024-05-17', QUARTER) AS q, LAST_DAY(DATE '2024-02-10') AS last, UNIX_DATE(DATE '1970-01-02') AS one, FORMAT_DATE('%d %b %Y', DATE '2024-03-13') AS fd, date_trunc('month', TIMESTAMP '2024-05-17T01:02:03Z') AS df_order;

SELECT TIMESTAMP_TRUNC(TIMESTAMP '2024-03-13T10:20:30Z', FORTNIGHT);

-- Map functions and GoogleSQL's names of DataFusion's functions.
SELECT MAP_CONTAINS_KEY(info, b'city') AS has_city, MAP_CONTAINS_KEY(info, b'nope') AS has_nope, MAP_EMPTY(info) AS empty, ARRAY_LENGTH(MAP_ENTRIES(info)) AS entries, MAP_ENTRIES(info)[0] AS first FROM users WHERE _key = 'user#001';

SELECT LOGICAL_AND(_key > 'a') AS all_after_a, LOGICAL_OR(_key = 'user#001') AS any_one, APPROX_COUNT_DISTINCT(_key) AS keys, ARRAY_INCLUDES(['a', 'b'], 'b') AS inc, IFNULL(NULL, 7) AS seven FROM users;

-- Literals and forms: escapes, double-quoted strings, hexadecimal integers, .field, IN UNNEST.
SELECT 'a\x41\tb' AS escaped, "dq" AS dq, 0x1F AS hex, LENGTH('\n') AS one;

SELECT _key FROM users WHERE _key IN UNNEST([b'user#001', b'user#003']);

SELECT count(*) AS others FROM users WHERE _key NOT IN UNNEST([b'user#001']);

SELECT info['city'][OFFSET(0)].value AS city, info['city'][OFFSET(0)].timestamp AS ts FROM users(with_history => TRUE) WHERE _key = 'user#001';

-- STRING SUBSTR/REPLACE as GoogleSQL; arithmetic and arrays.
SELECT SUBSTR('apple', -2) AS le, SUBSTR('apple', 0, 2) AS ap, SUBSTR('héllo', 2, 3) AS ell, REPLACE('abc', '', 'x') AS abc, REPLACE('a.b.c', '.', '-') AS dashes;

SELECT LOG(100, 10) AS two, LOG(EXP(1)) AS one, DIV(-7, 2) AS div, SAFE_DIVIDE(1, 0) AS nul, IEEE_DIVIDE(1, 0) AS inf, SAFE_ADD(9223372036854775807, 1) AS overflow, SAFE_NEGATE(-5) AS five;

SELECT ARRAY_SLICE([1, 2, 3, 4, 5], 1, 3) AS mid, ARRAY_SLICE([1, 2, 3, 4, 5], -3, -1) AS tail, ARRAY_FIRST(['a', 'b']) AS a, ARRAY_LAST(['a', 'b']) AS b, GENERATE_ARRAY(1, 4) AS g;

SELECT IF(1 < 2, 'yes', 'no') AS yes, MOD(7, 3) AS one, IS_NAN(CAST('NaN' AS FLOAT64)) AS nan, CEILING(1.2) AS c, TIMESTAMP_FROM_UNIX_MILLIS(0) AS epoch, COUNTIF(_key > 'user#003') AS later, VARIANCE(LENGTH(_key)) AS v FROM users;

SELECT DIV(1, 0);

SELECT ARRAY_FIRST(ARRAY_SLICE([1, 2], 1, 0));

-- Hash functions.
SELECT FARM_FINGERPRINT(CONCAT(CAST(1 AS STRING), 'foo', CAST(true AS STRING))) AS fp, TO_BASE64(MD5('Hello World')) AS md5, TO_HEX(SHA1(b'abc')) AS sha1, LENGTH(SHA256(_key)) AS sha256_len, BYTE_LENGTH(SHA512('x')) AS sha512_len FROM users WHERE _key = 'user#001';

-- t.* has no _timestamp either.
SELECT u.* FROM users AS u WHERE _key = 'user#005';

-- JSON functions (Google's documentation examples).
SELECT JSON_EXTRACT('{"class": {"students": [{"name": "Jane"}]}}', '$.class') AS extract, JSON_EXTRACT_SCALAR('{"name": "Jakob", "age": "6"}', '$.age') AS age, JSON_QUERY('{"a": {"b.c": [1, 2]}}', '$.a."b.c"[1]') AS two, JSON_VALUE('{"a": null}', '$.a') AS nul, JSON_QUERY_ARRAY('{"fruits": ["apples", "oranges"]}', '$.fruits') AS fruits, JSON_VALUE_ARRAY('[1, "x", true]') AS scalars;

SELECT TO_JSON_STRING(STRUCT(1 AS a, [b'ab'] AS b, CAST('NaN' AS FLOAT64) AS c, 9007199254740993 AS d)) AS json, TO_JSON_STRING([1, 2], true) AS pretty;

SELECT JSON_VALUE('{"a": 1', '$.a');

SELECT JSON_VALUE('{"a": 1}', 'a');

-- Strings.
SELECT INSTR('banana', 'an', 1, 2) AS four, INSTR('banana', 'an', -1) AS back, REGEXP_EXTRACT_ALL('Try `func(x)` or `func(y)`', '`(.+?)`') AS all_groups, REGEXP_SUBSTR('abc123def456', '[0-9]+', 1, 2) AS second, TO_BASE32(b'abcde\xFF') AS b32, FROM_BASE32('MFRGGZDF74======') AS raw;

SELECT TO_CODE_POINTS('âb') AS points, CODE_POINTS_TO_STRING([65, 255, 513]) AS text, CODE_POINTS_TO_BYTES([65, 98]) AS bytes, UNICODE('âbcd') AS first, SOUNDEX('Ashcraft') AS soundex, NORMALIZE('\u00ea', NFD) = 'e\u0302' AS nfd, NORMALIZE_AND_CASEFOLD('ABC') AS folded;

SELECT FORMAT('%d-%s|%5.2f|%-4d|%x|%T', 10, 'x', 3.14159, 7, 255, 'q') AS formatted, FORMAT('%d', NULL) AS nul;

SELECT FORMAT('%d');

-- Arrays, lambdas and aggregates.
SELECT ARRAY_IS_DISTINCT([1, 1, 2]) AS dup, ARRAY_LAST_N([1, 2, 3, 4, 5], 2) AS last2, ARRAY_OFFSET(['a', 'b', 'a'], 'a', LAST) AS last_a, ARRAY_OFFSETS(['a', 'b', 'a'], 'a') AS all_a, GENERATE_DATE_ARRAY('2016-10-05', '2016-10-08', INTERVAL 2 DAY) AS dates, GENERATE_TIMESTAMP_ARRAY('2016-10-05 00:00:00', '2016-10-05 02:00:00', INTERVAL 1 HOUR) AS hours;

SELECT ARRAY_FILTER([1, 2, 3], e -> e > 1) AS filtered, ARRAY_TRANSFORM([1, 2, 3], e -> e * 10) AS transformed, ARRAY_INCLUDES([1, 2, 3], e -> e > 2) AS any_big;

SELECT ARRAY_AGG(_key ORDER BY _key DESC LIMIT 2) AS newest, ARRAY_CONCAT_AGG([LENGTH(_key)]) AS lengths, ANY_VALUE(_key HAVING MAX _key) AS maxkey, ANY_VALUE(_key HAVING MIN _key) AS minkey, APPROX_QUANTILES(LENGTH(info['city']), 2) AS q, APPROX_TOP_COUNT(SUBSTR(_key, 1, 5), 1) AS top, APPROX_TOP_SUM(SUBSTR(_key, 1, 5), 2, 1) AS topsum FROM users;

-- Numbers, casts, overflow and SAFE.
SELECT SIGN(-5) AS neg, SIGN(2.5) AS pos, BIT_COUNT(-1) AS all_ones, BIT_COUNT(b'\x00\x08') AS one, ROUND(SEC(0), 6) AS sec0, EUCLIDEAN_DISTANCE([1.0, 2.0], [3.0, 4.0]) AS dist, ~5 AS tilde, CAST(-1.5 AS INT64) AS away, CAST(2.5 AS INT64) AS three, SAFE_CAST(1e30 AS INT64) AS too_big;

SELECT CAST(TIMESTAMP '2008-12-25 15:30:00.25+00' AS STRING) AS text, STRING(TIMESTAMP '2008-12-25 15:30:00+00', 'America/Los_Angeles') AS la;

SELECT 9223372036854775807 + 1;

SELECT SAFE.SUBSTR('abc', 0, -1) AS nul, SAFE.FROM_BASE32('!') AS bad, SAFE.TO_HEX(b'a') AS ok, SAFE.LOG(-1) AS neg;

-- Typed literals, comments and more quoting.
SELECT ARRAY<INT64>[1, 2] AS ints, ARRAY<STRING>[] AS empty, STRUCT<a INT64, b STRING>(1, 'x') AS s, '''it's''' AS triple, rb'\x41' AS rawbytes # a comment
;

SELECT _key FROM users WHERE _key LIKE b'user#00%' ORDER BY _key LIMIT 2;

-- A lambda over a subquery's column, once the two projections are merged into one
-- (over VALUES, whose unused column stays).
SELECT ARRAY_TRANSFORM(arr, x -> x + 1) AS plus_one, ARRAY_FILTER(arr, x -> x > 1) AS over_one FROM (SELECT arr FROM (VALUES ([1, 2, 3], 7)) AS t(arr, padding));
