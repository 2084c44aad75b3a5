-- A gateway tenant's limits and usage (gateway/limits.py), shared by every gateway replica: each request's check
-- and take are one step, so concurrent requests never overshoot a limit and no count is lost.
-- KEYS[1] the tenant's buckets (a hash: requests, requests_at, tokens, tokens_at; absent fields: full),
-- KEYS[2] its requests in flight (a sorted set: request id -> when its slot lapses, should a gateway die),
-- KEYS[3] this hour's usage (a hash: "<tenant>|<model>|<what>" -> count).
-- ARGV[1] "admit" or "finish", ARGV[2] the request's id, ARGV[3] the usage field prefix "<tenant>|<model>|",
-- ARGV[4] the usage hash's lifetime in seconds, ARGV[5] requests_per_minute, ARGV[6] tokens_per_minute,
-- ARGV[7] max_in_flight (0: no such limit);
-- admit: ARGV[8] seconds an in-flight slot lasts at most.
-- finish: ARGV[8] texts, ARGV[9] tokens, ARGV[10] cached texts (the tokens are taken from the bucket now:
-- a request's tokens are known once it is done, so the bucket may go below zero and refuses until refilled),
-- ARGV[11] "1" to count the request itself (one of a tenant with no limits, which no admit call counted).
-- Returns, for admit, {"ok", how many of the tenant's requests were in flight before this one} (the gateway queues
-- a tenant's deeper requests behind other tenants' first ones); for finish {"ok"}; for a refusal {limit name,
-- seconds until it would admit, as a string}.
local clock = redis.call('TIME')
local now = tonumber(clock[1]) + tonumber(clock[2]) / 1e6
local mode, id, prefix, usage_ttl = ARGV[1], ARGV[2], ARGV[3], ARGV[4]
local rpm, tpm, most = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])

-- A bucket's level now: refilled at capacity per minute since it was last written, at most its capacity.
local function level(name, capacity)
  local value = tonumber(redis.call('HGET', KEYS[1], name))
  if value == nil then return capacity end
  local at = tonumber(redis.call('HGET', KEYS[1], name .. '_at'))
  return math.min(capacity, value + (now - at) * capacity / 60)
end

-- Write a bucket's level; the hash lives until every bucket in it would be full again.
local function write(name, value, capacity)
  redis.call('HSET', KEYS[1], name, tostring(value), name .. '_at', tostring(now))
  local full_in = math.ceil((capacity - value) * 60 / capacity) + 1
  if full_in > redis.call('TTL', KEYS[1]) then redis.call('EXPIRE', KEYS[1], full_in) end
end

local function count(what, amount)
  if amount ~= 0 then redis.call('HINCRBY', KEYS[3], prefix .. what, amount) end
  redis.call('EXPIRE', KEYS[3], usage_ttl)
end

if mode == 'finish' then
  redis.call('ZREM', KEYS[2], id)
  local tokens = tonumber(ARGV[9])
  if tpm > 0 and tokens > 0 then write('tokens', level('tokens', tpm) - tokens, tpm) end
  count('texts', tonumber(ARGV[8]))
  count('tokens', tokens)
  count('cached', tonumber(ARGV[10]))
  if ARGV[11] == '1' then count('requests', 1) end
  return {'ok'}
end

local function refuse(limit, wait)
  count('refused_' .. limit, 1)
  return {limit, tostring(wait)}
end

redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local in_flight = redis.call('ZCARD', KEYS[2])
if most > 0 and in_flight >= most then return refuse('max_in_flight', 0.1) end
local requests = rpm > 0 and level('requests', rpm) or 0
if rpm > 0 and requests < 1 then return refuse('requests_per_minute', (1 - requests) * 60 / rpm) end
local tokens = tpm > 0 and level('tokens', tpm) or 0
if tpm > 0 and tokens <= 0 then return refuse('tokens_per_minute', (0.001 - tokens) * 60 / tpm) end
if rpm > 0 then write('requests', requests - 1, rpm) end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[8]), id)
redis.call('EXPIRE', KEYS[2], math.ceil(tonumber(ARGV[8])) + 1)
count('requests', 1)
return {'ok', in_flight}
