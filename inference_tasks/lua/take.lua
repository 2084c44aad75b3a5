-- The atomic take (broker/fetch.py): record a message as unacked, then pop it, in one step.
-- KEYS[1] the unacked hash, KEYS[2] the unacked index (a sorted set: tag -> time),
-- KEYS[3..] the lists, in the order they are served.
-- ARGV[1] the record's tag, ARGV[2] its time (the index's score), ARGV[3..] each list's queue as a
-- JSON string (the record's routing key: kombu's sweep, requeue and close put the message back there).
-- The record is written before the message is popped: a write refused (maxmemory) pops nothing.
-- Returns {index of the list, message, 1 if a list still holds a message after the pop else 0}, or false
-- when every list is empty. (A consumer told of every write skips the take that would find nothing.)
for i = 3, #KEYS do
  local message = redis.call('LINDEX', KEYS[i], -1)
  if message then
    redis.call('HSET', KEYS[1], ARGV[1], '[' .. message .. ',"",' .. ARGV[i] .. ']')
    redis.call('ZADD', KEYS[2], ARGV[2], ARGV[1])
    redis.call('RPOP', KEYS[i])
    for j = i, #KEYS do
      if redis.call('LLEN', KEYS[j]) > 0 then
        return {i - 3, message, 1}
      end
    end
    return {i - 3, message, 0}
  end
end
return false
