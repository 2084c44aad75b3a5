-- Ring an idle consumer's doorbell (broker/wakeup.py) when a list it consumes holds a message here.
-- KEYS[1] the doorbell, KEYS[2..] the consumed lists a tracking notice named.
-- ARGV[1] the doorbell's lifetime in seconds.
-- Tracking notices name keys of every database of the server, and a take's pop writes a list as a
-- push does: ringing only for a list that holds a message in this database spares the consumer a
-- take that would find nothing (another database's push, another worker's pop).
-- Returns 1 when it rang, 0 when every named list was empty.
for i = 2, #KEYS do
  if redis.call('LLEN', KEYS[i]) > 0 then
    redis.call('RPUSH', KEYS[1], '1')
    redis.call('LTRIM', KEYS[1], -1, -1)
    redis.call('EXPIRE', KEYS[1], ARGV[1])
    return 1
  end
end
return 0
