-- fixed_window: a counter per window that opens at the first request after
-- the previous window closed (the INCR + EXPIRE counter, without its races).
--
-- KEYS[1]  state key, a hash {start = window start (us), count = admitted cost}
-- ARGV[1]  now in microseconds; empty: Redis TIME
-- ARGV[2]  cost of this request, 1 <= cost <= limit
-- ARGV[3]  limit: cost admitted per window, >= 1
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
--   remaining       limit - cost admitted in the current window (after this request)
--   limit           the limit used: ARGV[3], or the override's
--   reset_ms        ms until the current window closes: ceil((start + window - now) / 1 ms);
--                   a new window opens with the first request at or after that time
--   retry_after_ms  0 when admitted; else reset_ms: a request of the same cost sent
--                   exactly then opens a new window and is admitted, 1 ms earlier it is not
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
-- Promise: the window [start, start + window) admits at most limit cost; a window
-- opens at the first request at or after the previous one's end (so 110
-- simultaneous requests against 100 per second: exactly 100 admitted, 10 denied).
-- Across a window boundary up to 2 x limit may pass in a short time: that is
-- the price of this algorithm (see sliding_log, sliding_window).
-- Denied requests change nothing. Window boundaries come from the stored start
-- and now, never from the TTL.
--
-- TTL: PEXPIRE reset_ms + 1 on every admission, so the key vanishes when its
-- window closes (an expired key and a stale one decide the same). The 1 ms
-- margin covers Redis's expiry clock, which counts whole milliseconds from
-- the start of the command, a little before TIME was read.
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
	a.limit, err = arg_int(argv, 3, 'limit', 1, 1e9)
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

-- A key of another type holds another algorithm's state (its rule changed
-- algorithm): it is replaced, as if it were missing.
local h = redis.pcall('HMGET', key, 'start', 'count')
if h.err then redis.call('DEL', key); h = {} end
local start, count = tonumber(h[1]), tonumber(h[2])
if start == nil or count == nil or now >= start + window_us then
	start, count = now, 0	-- the previous window closed: this request opens one
end
local reset_ms = cdiv(start + window_us - now, 1000)

if count + cost <= limit then
	count = count + cost
	redis.call('HSET', key, 'start', num(start), 'count', num(count))
	redis.call('PEXPIRE', key, reset_ms + 1)
	return reply({1, limit - count, limit, reset_ms, 0, now, 0})
end
return reply({0, math.max(0, limit - count), limit, reset_ms, reset_ms, now, 0})
