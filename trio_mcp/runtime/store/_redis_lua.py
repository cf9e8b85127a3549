# The Lua scripts of the Redis store (trio_mcp.runtime.store._redis): each is one atomic step of the
# store contract (trio_mcp.runtime.store._store), run by Redis itself, so that two workers never
# interleave inside one.
#
# The keys under the store's prefix <p>:
#   <p>:session:<id>    a session's record, a hash (RECORD_FIELDS, and "unit", "renewed",
#                       "subs_version"), expiring with the session
#   <p>:subs:<id>       its subscriptions, a set (TM-STORE-SUBS)
#   <p>:copies:<id>     the keys of its streams' copies, a set (deleted with it)
#   <p>:sessions        every session, a sorted set scored by its record's expiry (ms)
#   <p>:used            every session, scored by its last renewal (ms), for eviction
#   <p>:unit:<u>, <p>:used:<u>   the same two, for one unit's sessions (TM-STORE-BOUND)
#   <p>:ev:<id>:<origin>:<n>     a request stream's copy, a Redis Stream whose entry ids are
#                       the messages' seqs (<seq>-1); field "d" a message, "u" the id (JSON) of
#                       a request the claim ended without a response
#   <p>:evm:<id>:<origin>:<n>    the copy's hash: "req" its request ids (JSON, one a line),
#                       "a:<id as JSON>" the seq answering each, "lost", and "end" once claimed
#   <p>:relay:<origin>  a worker's relay address (TM-STORE-STREAMS)
#   <p>:task:<id>       a task as tasks/get shows it, JSON (TM-STORE-TASKS)
#
# The scripts reach keys that are not in their KEYS (a record's unit's sets, its copies): the
# store supports a single Redis, not a cluster.
from __future__ import annotations

from typing import Final

__all__ = [
    "APPEND",
    "CLAIM",
    "COUNT",
    "CREATE",
    "DELETE",
    "EVICT",
    "FETCH",
    "KEEP",
    "MAX_EVICT",
    "RECORD_FIELDS",
    "SAVE",
    "SAVE_TASK",
    "SUBSCRIBE",
    "UNSUBSCRIBE",
]

#: The hash fields of a session record written at its creation.
RECORD_FIELDS: Final = (
    "version", "client_info", "client_capabilities", "server_capabilities", "state_bytes",
    "peer", "principal", "initialized", "log_level",
)

#: The most records one creation deletes to make room (TM-STORE-BOUND).
MAX_EVICT: Final = 8

# What every script below shares (TM-STORE-BOUND). A session is counted in <p>:sessions and
# <p>:unit:<u>, each member scored with the record's expiry, so that an expired record leaves
# both counts when it expires: `expire` takes it out before anything is counted. <p>:used and
# <p>:used:<u> order the same members by their last renewal, for the choice of whom to evict:
# the expiry cannot order them, since a session not yet initialized lives 60 s and one
# initialized 30 minutes.
_LIB = """
local function now_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local function keep_for(key, ttl)
  if redis.call('PTTL', key) < ttl then redis.call('PEXPIRE', key, ttl) end
end
local function renew(p, id, rec, ttl, now)
  ttl = tonumber(ttl)
  redis.call('PEXPIRE', rec, ttl)
  redis.call('HSET', rec, 'renewed', now)
  redis.call('PEXPIRE', p .. ':subs:' .. id, ttl)
  redis.call('ZADD', p .. ':sessions', 'XX', now + ttl, id)
  redis.call('ZADD', p .. ':used', 'XX', now, id)
  local u = redis.call('HGET', rec, 'unit')
  if u then
    local uk, used = p .. ':unit:' .. u, p .. ':used:' .. u
    redis.call('ZADD', uk, 'XX', now + ttl, id)
    redis.call('ZADD', used, 'XX', now, id)
    keep_for(uk, ttl)
    keep_for(used, ttl)
  end
end
local function drop(p, id)
  local rec = p .. ':session:' .. id
  local u = redis.call('HGET', rec, 'unit')
  local copies = p .. ':copies:' .. id
  local keys = redis.call('SMEMBERS', copies)
  for i = 1, #keys do redis.call('DEL', keys[i]) end
  redis.call('DEL', rec, p .. ':subs:' .. id, copies)
  redis.call('ZREM', p .. ':sessions', id)
  redis.call('ZREM', p .. ':used', id)
  if u then
    redis.call('ZREM', p .. ':unit:' .. u, id)
    redis.call('ZREM', p .. ':used:' .. u, id)
  end
end
local function expire(counted, ordered, now)
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', counted, '-inf', now)) do
    redis.call('ZREM', ordered, id)
  end
  redis.call('ZREMRANGEBYSCORE', counted, '-inf', now)
end
"""

#: Creates a record within the store's bound (TM-STORE-BOUND): at a cap (its unit's, then
#: the store's), the least recently renewed record, if it has not been renewed for
#: ARGV[idle_ms] ms, is deleted to make room; with none such, the creation is refused.
#: ARGV: ttl_ms, max_sessions ('' none), max_per_unit ('' none), idle_ms, prefix, id, unit,
#: then the record's fields and values. Returns {outcome, evicted ids}.
CREATE: Final = _LIB + """
local p, id, unit = ARGV[5], ARGV[6], ARGV[7]
local now = now_ms()
local all, all_used = p .. ':sessions', p .. ':used'
local uk, unit_used = p .. ':unit:' .. unit, p .. ':used:' .. unit
local idle_before = now - tonumber(ARGV[4])
expire(all, all_used, now)
expire(uk, unit_used, now)
local evicted = {}
local function room(counted, ordered, cap)
  if cap == '' then return true end
  cap = tonumber(cap)
  while redis.call('ZCARD', counted) >= cap do
    if #evicted >= MAX_EVICT then return false end
    local oldest = redis.call('ZRANGEBYSCORE', ordered, '-inf', idle_before, 'LIMIT', 0, 1)
    if #oldest == 0 then return false end
    drop(p, oldest[1])
    evicted[#evicted + 1] = oldest[1]
  end
  return true
end
if not room(uk, unit_used, ARGV[3]) then return {'unit-full', evicted} end
if not room(all, all_used, ARGV[2]) then return {'store-full', evicted} end
local ttl = tonumber(ARGV[1])
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
redis.call('HSET', KEYS[1], 'unit', unit, 'renewed', now, 'subs_version', 0, unpack(fields))
redis.call('PEXPIRE', KEYS[1], ttl)
redis.call('ZADD', all, now + ttl, id)
redis.call('ZADD', all_used, now, id)
redis.call('ZADD', uk, now + ttl, id)
redis.call('ZADD', unit_used, now, id)
keep_for(uk, ttl)
keep_for(unit_used, ttl)
return {'created', evicted}
""".replace("MAX_EVICT", str(MAX_EVICT))

#: Reads a record and renews it in one round trip: the idle time to live once
#: notifications/initialized has arrived, the shorter one before (TM-SESS-IDLE). The
#: subscriptions come with it only when their version is not the one the reader has seen.
#: ARGV: idle_ms, uninitialized_ms, prefix, id, version seen ('' none).
FETCH: Final = _LIB + """
local h = redis.call('HGETALL', KEYS[1])
if #h == 0 then return {h} end
local ttl = ARGV[2]
local sv = '0'
for i = 1, #h, 2 do
  if h[i] == 'initialized' and h[i + 1] == '1' then ttl = ARGV[1] end
  if h[i] == 'subs_version' then sv = h[i + 1] end
end
renew(ARGV[3], ARGV[4], KEYS[1], ttl, now_ms())
if ARGV[5] == sv then return {h} end
return {h, redis.call('SMEMBERS', ARGV[3] .. ':subs:' .. ARGV[4])}
"""

#: Writes what changed only while the session exists: a save racing a DELETE must not bring
#: the session back. ARGV: initialized, log level, ttl_ms, prefix, id.
SAVE: Final = _LIB + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'initialized', ARGV[1], 'log_level', ARGV[2])
renew(ARGV[4], ARGV[5], KEYS[1], ARGV[3], now_ms())
return 1
"""

#: One subscription more (TM-STORE-SUBS): SADD, unless the session has ARGV[2] already.
#: ARGV: uri, max, ttl_ms, prefix, id.
#: Returns {1 added | 0 already | -1 no session | -2 full, the subscriptions' version}.
SUBSCRIBE: Final = _LIB + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
local subs = ARGV[4] .. ':subs:' .. ARGV[5]
local sv = tonumber(redis.call('HGET', KEYS[1], 'subs_version') or '0')
if redis.call('SISMEMBER', subs, ARGV[1]) == 1 then return {0, sv} end
if redis.call('SCARD', subs) >= tonumber(ARGV[2]) then return {-2, sv} end
redis.call('SADD', subs, ARGV[1])
sv = redis.call('HINCRBY', KEYS[1], 'subs_version', 1)
renew(ARGV[4], ARGV[5], KEYS[1], ARGV[3], now_ms())
return {1, sv}
"""

#: One subscription less: SREM. ARGV: uri, ttl_ms, prefix, id.
#: Returns {1 removed | 0 not there | -1 no session, the subscriptions' version}.
UNSUBSCRIBE: Final = _LIB + """
if redis.call('EXISTS', KEYS[1]) == 0 then return {-1, 0} end
local sv = tonumber(redis.call('HGET', KEYS[1], 'subs_version') or '0')
if redis.call('SREM', ARGV[3] .. ':subs:' .. ARGV[4], ARGV[1]) == 0 then return {0, sv} end
sv = redis.call('HINCRBY', KEYS[1], 'subs_version', 1)
renew(ARGV[3], ARGV[4], KEYS[1], ARGV[2], now_ms())
return {1, sv}
"""

#: Renews a record that has work running at a worker; 0 when it has ended meanwhile.
#: ARGV: ttl_ms, prefix, id.
KEEP: Final = _LIB + """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
renew(ARGV[2], ARGV[3], KEYS[1], ARGV[1], now_ms())
return 1
"""

#: The counts (TM-STORE-BOUND): what expired leaves them first.
COUNT: Final = _LIB + """
local now = now_ms()
expire(KEYS[1], KEYS[3], now)
expire(KEYS[2], KEYS[4], now)
return {redis.call('ZCARD', KEYS[1]), redis.call('ZCARD', KEYS[2])}
"""

#: Evicts a session a worker evicted (TM-STORE-BOUND), unless it was renewed within ARGV[3]
#: ms: another worker runs something of it, or its client used it there.
#: ARGV: prefix, id, idle_ms.
EVICT: Final = _LIB + """
local at = redis.call('HGET', KEYS[1], 'renewed')
if not at then return 0 end
if now_ms() - tonumber(at) < tonumber(ARGV[3]) then return 0 end
drop(ARGV[1], ARGV[2])
return 1
"""

#: Deletes everything of a session at once: record, subscriptions, streams' copies, counts.
DELETE: Final = _LIB + """
drop(ARGV[1], ARGV[2])
return 1
"""

#: Copies one change of a request stream (TM-STORE-STREAMS), trimmed to what the holder's
#: window keeps, unless the stream was claimed (then nothing more is copied: its end is
#: written) or its session has ended (TM-STORE-BOUND: its copies went with it).
#: KEYS: the copy, its hash, the session's set of copies, its record.
#: ARGV: seq ('' none), 'r' for a response else 'm', data, answered id (JSON), first kept seq,
#: newest lost seq, ttl_ms, request ids (JSON, one a line).
APPEND: Final = """
if redis.call('HGET', KEYS[2], 'end') == '1' then return 0 end
if redis.call('EXISTS', KEYS[4]) == 0 then return 0 end
if redis.call('SADD', KEYS[3], KEYS[1], KEYS[2]) > 0 then
  redis.call('PEXPIRE', KEYS[3], ARGV[7])
end
if ARGV[8] ~= '' then redis.call('HSETNX', KEYS[2], 'req', ARGV[8]) end
if ARGV[1] ~= '' then
  -- A seq at or below the newest added is refused by Redis: added once, in order.
  redis.pcall('XADD', KEYS[1], ARGV[1] .. '-1', 'd', ARGV[3])
  if ARGV[2] == 'r' then redis.call('HSET', KEYS[2], 'a:' .. ARGV[4], ARGV[1]) end
  redis.call('XTRIM', KEYS[1], 'MINID', ARGV[5])
end
local lost = tonumber(redis.call('HGET', KEYS[2], 'lost') or '-1')
if tonumber(ARGV[6]) > lost then redis.call('HSET', KEYS[2], 'lost', ARGV[6]) end
redis.call('PEXPIRE', KEYS[1], ARGV[7])
redis.call('PEXPIRE', KEYS[2], ARGV[7])
if redis.call('PTTL', KEYS[3]) < tonumber(ARGV[7]) then redis.call('PEXPIRE', KEYS[3], ARGV[7]) end
return 1
"""

#: Reads a gone holder's stream after a cursor, ending it first: each request without a
#: response gets an event of its own after the last message (field "u": its id), so that
#: every resume reads the same end; the reader answers each with an error of its own making.
#: KEYS: the copy, its hash. ARGV: after, ttl_ms.
#: Returns {'unknown'} | {'gap', hash} | {'events', hash, entries after the cursor}.
CLAIM: Final = """
local h = redis.call('HGETALL', KEYS[2])
if #h == 0 then return {'unknown'} end
local m = {}
for i = 1, #h, 2 do m[h[i]] = h[i + 1] end
local after = tonumber(ARGV[1])
if after < tonumber(m['lost'] or '-1') then return {'gap', h} end
if m['end'] ~= '1' then
  redis.call('HSET', KEYS[2], 'end', '1')
  local seq = after
  local last = redis.call('XREVRANGE', KEYS[1], '+', '-', 'COUNT', 1)
  if #last > 0 then
    seq = math.max(seq, tonumber(string.match(last[1][1], '^(%d+)')))
  end
  for rid in string.gmatch(m['req'] or '', '[^\\n]+') do
    if not m['a:' .. rid] then
      seq = seq + 1
      redis.call('XADD', KEYS[1], seq .. '-1', 'u', rid)
      redis.call('HSET', KEYS[2], 'a:' .. rid, seq)
    end
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  h = redis.call('HGETALL', KEYS[2])
end
return {'events', h, redis.call('XRANGE', KEYS[1], '(' .. after .. '-1', '+')}
"""

#: Keeps a task's latest state (TM-STORE-TASKS), unless the state kept is an end: a terminal
#: state never moves (TK-STATES), whichever worker wrote it. ARGV: the task (JSON), ttl_ms.
#: Returns nothing once written, else the end that stays.
SAVE_TASK: Final = """
local old = redis.call('GET', KEYS[1])
if old then
  local ok, kept = pcall(cjson.decode, old)
  if ok and type(kept) == 'table' and type(kept['t']) == 'table' then
    local status = kept['t']['status']
    if status == 'completed' or status == 'failed' or status == 'cancelled' then
      return old
    end
  end
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return false
"""
