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
-- KEYS[2]  optional: the override hash, in KEYS[1]'s hash slot (rlgate uses
--          KEYS[1] .. ':override'). Its fields limit, window_ms, burst and
--          precision_ms stand in for ARGV[3..6] (absent or empty fields keep
--          them) and are checked like them with this request's cost; a set
--          that fails is ignored as a whole and ARGV is used (reply[11] = 3).
--          unlimited = 1 admits without counting: the state is not read or
--          written. Without KEYS[2] nothing is read and the reply has 7 fields.
--
-- Reply {allowed, remaining, limit, reset_ms, retry_after_ms, now_us, delay_ms}:
--   allowed         1 admitted, 0 denied
--   remaining       limit - cost admitted in (now - window, now] (after this request)
--   limit           the limit used: ARGV[3], or the override's
--   reset_ms        ms until the newest admission leaves the window (ceil): then the
--                   whole limit is free again; 0 when the log is empty
--   retry_after_ms  0 when admitted; else ms until enough of the oldest admissions
--                   have left the window for this cost (ceil): a request sent
--                   exactly then is admitted, 1 ms earlier it is not
--   now_us          the time used for the decision
--   delay_ms        always 0
-- With KEYS[2] the reply goes on (the parameters the decision used):
--   window_ms       the window used: ARGV[4], or the override's
--   burst           0 (this algorithm has no burst)
--   precision_ms    0 (this algorithm has no precision)
--   override        0 none, 1 applied, 2 unlimited (admitted, nothing counted:
--                   remaining = limit, reset_ms = retry_after_ms = 0), 3 ignored
--   why             only when override is 3: "override ignored: <sentence>"
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

-- argv[i] (ARGV, or ARGV with the override's fields) as an integer in
-- [lo, hi]; dflt when empty (an error when dflt is nil).
local function arg_int(argv, i, name, lo, hi, dflt)
	local s = argv[i]
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

local function args(argv)
	local a, err = {}, nil
	a.cost, err = arg_int(argv, 2, 'cost', 1, 1e9)
	if err then return nil, err end
	a.limit, err = arg_int(argv, 3, 'limit', 1, 100000)
	if err then return nil, err end
	a.window_ms, err = arg_int(argv, 4, 'window_ms', 1, 1e11)
	if err then return nil, err end
	if a.cost > a.limit then
		return nil, 'cost ' .. num(a.cost) .. ' is above limit ' .. num(a.limit) ..
		    ': such a request could never be admitted'
	end
	a.now, err = arg_int(argv, 1, 'now (microseconds)', 0, MAX, -1)
	if err then return nil, err end
	if a.now < 0 then
		local t = redis.call('TIME')
		a.now = tonumber(t[1]) * 1000000 + tonumber(t[2])
	end
	return a
end


local a, err = args(ARGV)
if not a then return redis.error_reply('rlgate: ' .. err) end

-- The override in KEYS[2]: the arguments to use, the override code (0 none,
-- 1 applied, 2 unlimited, 3 ignored) and, when ignored, why.
local function apply_override()
	local f = redis.pcall('HMGET', KEYS[2], 'limit', 'window_ms', 'burst',
	    'precision_ms', 'unlimited')
	if f.err then return a, 3, 'the override key (KEYS[2]) is not a hash' end
	for i = 1, 5 do
		if f[i] == '' then f[i] = false end
	end
	if f[5] and f[5] ~= '0' then
		if f[5] == '1' then return a, 2 end
		return a, 3, 'unlimited must be 1 or 0, got "' ..
		    string.gsub(string.sub(f[5], 1, 40), '[^%w%.%-%+]', '_') .. '"'
	end
	if not (f[1] or f[2] or f[3] or f[4]) then return a, 0 end
	local o, why = args({num(a.now), ARGV[2], f[1] or ARGV[3], f[2] or ARGV[4],
	    f[3] or ARGV[5], f[4] or ARGV[6]})
	if not o then return a, 3, why end
	return o, 1
end
local override, ignored = 0, nil
if KEYS[2] then a, override, ignored = apply_override() end

-- The seven fields; with KEYS[2], the parameters used and the override's code.
local function reply(t)
	if KEYS[2] then
		t[8], t[9], t[10], t[11] = a.window_ms, a.burst or 0, a.precision_ms or 0, override
		if ignored then t[12] = 'override ignored: ' .. ignored end
	end
	return t
end
if override == 2 then return reply({1, a.limit, a.limit, 0, 0, a.now, 0}) end
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
	return reply({1, limit - used - cost, limit, reset_ms, 0, now, 0})
end

-- Denied: the need-th oldest admission in the window must leave first.
local need = used + cost - limit
local r = redis.call('ZRANGEBYSCORE', key, '(' .. gone, '+inf', 'WITHSCORES', 'LIMIT', need - 1, 1)
local retry_ms = cdiv(tonumber(r[2]) + window_us - now, 1000)
local reset_ms = cdiv(newest() + window_us - now, 1000)
return reply({0, math.max(0, limit - used), limit, reset_ms, retry_ms, now, 0})
