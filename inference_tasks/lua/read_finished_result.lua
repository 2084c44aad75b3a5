-- Read a task's stored result and delete it if the task has finished (gateway/results.py; the Ruby
-- client's READ_FINISHED_RESULT is the same): one atomic step, so a result read is never left behind, and
-- a STARTED state is never removed. Celery writes "status" as the first key of the result's JSON.
-- KEYS[1] the result's key (celery-task-meta-<id>). Returns the raw result, or false when none is stored.
local raw = redis.call('GET', KEYS[1])
if not raw then return false end
local state = string.match(raw, '"status"%s*:%s*"(%u+)"')
if state == 'SUCCESS' or state == 'FAILURE' or state == 'REVOKED' then redis.call('DEL', KEYS[1]) end
return raw
