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
--
-- Reply {allowed, remaining, limit, reset_ms, retry_after_ms, now_us, delay_ms}:
--   allowed         1 admitted, 0 denied
--   remaining       limit - cost admitted in the current window (after this request)
--   limit           ARGV[3]
--   reset_ms        ms until the current window closes: ceil((start + window - now) / 1 ms);
--                   a new window opens with the first request at or after that time
--   retry_after_ms  0 when admitted; else reset_ms: a request of the same cost sent
--                   exactly then opens a new window and is admitted, 1 ms earlier it is not
--   now_us          the time used for the decision
--   delay_ms        always 0
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
	a.limit, err = arg_int(3, 'limit', 1, 1e9)
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
	return {1, limit - count, limit, reset_ms, 0, now, 0}
end
return {0, math.max(0, limit - count), limit, reset_ms, reset_ms, now, 0}
