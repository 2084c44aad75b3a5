-- Push a task unless its queue is full (gateway/dispatch.py; the Ruby client's PUSH_UNLESS_FULL is the same):
-- the depth check and the push in one step, so racing gateways never overshoot the limit.
-- KEYS[1] the list to push onto, KEYS[2..] every priority list of its queue.
-- ARGV[1] the message, ARGV[2] the limit of waiting messages.
-- Returns the depth seen, negated (-depth - 1) when nothing was pushed.
local depth = 0
for i = 2, #KEYS do depth = depth + redis.call('LLEN', KEYS[i]) end
if depth >= tonumber(ARGV[2]) then return -depth - 1 end
redis.call('LPUSH', KEYS[1], ARGV[1])
return depth
