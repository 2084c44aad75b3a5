#!lua flags=allow-oom
-- Lease renewal (broker/leases.py). KEYS[1] the unacked index; ARGV[1] the time, ARGV[2..] the tags.
-- XX: only messages still unacked (an acked one must not come back), so memory does not grow.
-- allow-oom (Redis 7): at maxmemory Redis refuses a plain ZADD, and every lease a worker held then ran
-- out during a minute of full Redis; the first sweep once Redis took writes again ran all those tasks a
-- second time (the chaos soak: 37 of them).
for i = 2, #ARGV do
  redis.call('ZADD', KEYS[1], 'XX', ARGV[1], ARGV[i])
end
return 0
