-- Bigtable tables as GoogleSQL shows them: _key, _timestamp, family maps.
SELECT _key, info['name'], counts['visits'] FROM users ORDER BY _key;

SELECT CAST(info['name'] AS STRING) AS name, CAST(info['city'] AS STRING) AS city FROM users WHERE _key = 'user#001';

SELECT _key FROM `users` WHERE _key >= 'user#002' AND _key < 'user#004';

SELECT _key FROM users WHERE _key IN ('user#005', 'user#003', 'nope') ORDER BY _key;

SELECT count(*) FROM users WHERE _key LIKE 'user#%';

SELECT count(*) FROM users WHERE starts_with(CAST(_key AS STRING), 'zz');

SELECT CAST(_key AS STRING) AS k FROM users WHERE CAST(_key AS STRING) LIKE 'user#00%' AND _key > 'user#003';

SELECT _key FROM users WHERE _key = 'user#001' OR _key > 'user#005' ORDER BY _key;

SELECT _key FROM users WHERE _key = 'a' AND _key = 'b';

SELECT CAST(info['name'] AS STRING) AS name, be_int64(info['age']) AS age, be_float64(info['score']) AS score
FROM users WHERE be_int64(info['age']) > 40 ORDER BY age DESC;

SELECT sum(counts['visits']) AS visits, avg(be_int64(info['age'])) AS mean_age FROM users;

SELECT _key, _timestamp FROM users ORDER BY _key LIMIT 2;

SELECT _key FROM users LIMIT 3;

SELECT CAST(info['city'] AS STRING) AS city, count(*) AS n FROM users GROUP BY city ORDER BY city;

SELECT * FROM users WHERE _key = 'zz-other';

SELECT nope FROM users;

SELECT * FROM missing_table;

SELECT _key FROM users WHERE;

SELECT _key FORM users;

SELECT * FROM users; DROP TABLE users;

CREATE TABLE t AS SELECT 1;

SELECT _key, info['city'] FROM users(with_history => TRUE) WHERE _key = 'user#001';

SELECT CAST(_key AS STRING) AS k, counts FROM bigtable_history('users') WHERE _key < 'user#003';

SELECT CAST(_key AS STRING) AS k, unnest(info['city']) AS version FROM `users`(with_history => TRUE) WHERE _key = 'user#001';

SELECT * FROM missing(with_history => TRUE);
SELECT _key FROM users WHERE _key = @k;

SELECT CAST(_key AS STRING) AS k, counts['visits'] AS visits FROM users WHERE counts['visits'] IS NULL OR _key = 'user#005' ORDER BY k;

SELECT count(*) AS rows, count(counts['visits']) AS with_visits FROM users;
