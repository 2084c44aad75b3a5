-- A task's result in one round trip (broker/result_backend.py), with Celery's rule made atomic: a
-- stored SUCCESS is never replaced. Results are JSON only (app.py).
-- KEYS[1] the task's meta key; ARGV[1] the encoded meta, ARGV[2] its lifetime in seconds (0: none).
-- Returns 1 when stored and published, 0 when a SUCCESS was already there.
local current = redis.call('GET', KEYS[1])
if current then
  local ok, meta = pcall(cjson.decode, current)
  if ok and type(meta) == 'table' and meta['status'] == 'SUCCESS' then
    return 0
  end
end
if tonumber(ARGV[2]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'EX', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
redis.call('PUBLISH', KEYS[1], ARGV[1])
return 1
