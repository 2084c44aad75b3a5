-- A trained classifier head (ml/store.py): stores version N and moves `latest` forward only, so two
-- trainings of one name finishing out of order never point `latest` back at the older head.
-- KEYS[1] the head's versioned key, KEYS[2] its `latest` key, KEYS[3] the set of head names.
-- ARGV[1] the version, ARGV[2] the head as JSON, ARGV[3] its name.
redis.call('SET', KEYS[1], ARGV[2])
local current = tonumber(redis.call('GET', KEYS[2]) or '0')
if tonumber(ARGV[1]) > current then redis.call('SET', KEYS[2], ARGV[1]) end
redis.call('SADD', KEYS[3], ARGV[3])
return 1
