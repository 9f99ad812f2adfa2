-- sliding_log: every admitted cost unit is logged with its time; a request
-- is admitted when the log of the last window leaves room for its cost.
--
-- KEYS[1]  state key, a sorted set: one member "now_us:seq" per admitted cost
--          unit, scored with its admission time (us); seq makes members unique
-- ARGV[1]  now in microseconds; empty: Redis TIME
-- ARGV[2]  cost of this request, 1 <= cost <= limit
-- ARGV[3]  limit: cost admitted in any window, 1 <= limit <= 100000 (the log
--          holds up to limit members: use sliding_window for larger limits)
-- ARGV[4]  window in milliseconds, >= 1
-- ARGV[5]  burst: not used (ignored)
-- ARGV[6]  precision: not used (ignored)
--
-- Reply {allowed, remaining, limit, reset_ms, retry_after_ms, now_us, delay_ms}:
--   allowed         1 admitted, 0 denied
--   remaining       limit - cost admitted in (now - window, now] (after this request)
--   limit           ARGV[3]
--   reset_ms        ms until the newest admission leaves the window (ceil): then the
--                   whole limit is free again; 0 when the log is empty
--   retry_after_ms  0 when admitted; else ms until enough of the oldest admissions
--                   have left the window for this cost (ceil): a request sent
--                   exactly then is admitted, 1 ms earlier it is not
--   now_us          the time used for the decision
--   delay_ms        always 0
--
-- Promise (exact): any interval (t - window, t] admits at most limit cost.
-- An admission at time s counts for every t with t - window < s <= t.
-- Denied requests change nothing (the log is trimmed only on admission).
-- Decisions come from the logged times and now, never from the TTL.
--
-- TTL: PEXPIRE reset_ms + 1 on every admission (reset_ms = window): the key
-- vanishes when its newest admission has left the window (1 ms margin for
-- Redis's millisecond expiry clock).
--
-- Errors: a Redis error reply "rlgate: <sentence>" for bad arguments.

local MAX = 4503599627370496	-- 2^52: integers below are exact in a Lua number

local function num(s) return string.format('%d', s) end

-- floor(a / b) for integers, b > 0, exact (corrects the rounded quotient).
local function fdiv(a, b)
	local q = math.floor(a / b)
	if q * b > a then q = q - 1 elseif (q + 1) * b <= a then q = q + 1 end
	return q
end
local function cdiv(a, b) return -fdiv(-a, b) end

-- ARGV[i] as an integer in [lo, hi]; dflt when empty (an error when dflt is nil).
local function arg_int(i, name, lo, hi, dflt)
	local s = ARGV[i]
	if s == nil or s == '' then
		if dflt ~= nil then return dflt end
		return nil, name .. ' is missing (ARGV[' .. i .. '])'
	end
	if #s > 16 or not string.find(s, '^%-?%d+$') then
		local shown = string.gsub(string.sub(s, 1, 40), '[^%w%.%-%+]', '_')
		return nil, name .. ' must be an integer, got "' .. shown .. '"'
	end
	local v = tonumber(s)
	if v < lo then return nil, name .. ' must be at least ' .. num(lo) .. ', got ' .. s end
	if v > hi then return nil, name .. ' must be at most ' .. num(hi) .. ', got ' .. s end
	return v
end

local function args()
	local a, err = {}, nil
	a.cost, err = arg_int(2, 'cost', 1, 1e9)
	if err then return nil, err end
	a.limit, err = arg_int(3, 'limit', 1, 100000)
	if err then return nil, err end
	a.window_ms, err = arg_int(4, 'window_ms', 1, 1e11)
	if err then return nil, err end
	if a.cost > a.limit then
		return nil, 'cost ' .. num(a.cost) .. ' is above limit ' .. num(a.limit) ..
		    ': such a request could never be admitted'
	end
	a.now, err = arg_int(1, 'now (microseconds)', 0, MAX, -1)
	if err then return nil, err end
	if a.now < 0 then
		local t = redis.call('TIME')
		a.now = tonumber(t[1]) * 1000000 + tonumber(t[2])
	end
	return a
end


local a, err = args()
if not a then return redis.error_reply('rlgate: ' .. err) end
local key, now, cost, limit = KEYS[1], a.now, a.cost, a.limit
local window_us = a.window_ms * 1000
local gone = num(now - window_us)	-- admissions at or before this have left

-- The newest logged time (nil when the log is empty).
local function newest()
	local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
	return tonumber(last[2])
end

-- A key of another type holds another algorithm's state (its rule changed
-- algorithm): it is replaced, as if it were missing.
local used = redis.pcall('ZCOUNT', key, '(' .. gone, '+inf')
if type(used) == 'table' then redis.call('DEL', key); used = 0 end
if used + cost <= limit then
	redis.call('ZREMRANGEBYSCORE', key, '-inf', gone)
	local last = newest()	-- later than now only when the clock ran backwards
	if last == nil or last < now then last = now end
	local reset_ms = cdiv(last + window_us - now, 1000)
	local seq = redis.call('ZCARD', key)
	local stamp, left = num(now), cost
	while left > 0 do	-- NX and a rising seq: no member is ever overwritten
		local z = {}
		for i = 1, math.min(left, 1000) do
			z[2 * i - 1] = stamp
			z[2 * i] = stamp .. ':' .. num(seq)
			seq = seq + 1
		end
		left = left - redis.call('ZADD', key, 'NX', unpack(z))
	end
	redis.call('PEXPIRE', key, reset_ms + 1)
	return {1, limit - used - cost, limit, reset_ms, 0, now, 0}
end

-- Denied: the need-th oldest admission in the window must leave first.
local need = used + cost - limit
local r = redis.call('ZRANGEBYSCORE', key, '(' .. gone, '+inf', 'WITHSCORES', 'LIMIT', need - 1, 1)
local retry_ms = cdiv(tonumber(r[2]) + window_us - now, 1000)
local reset_ms = cdiv(newest() + window_us - now, 1000)
return {0, math.max(0, limit - used), limit, reset_ms, retry_ms, now, 0}
