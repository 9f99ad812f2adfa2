-- fixed_window: a counter per window that opens at the first request after
-- the previous window closed (the INCR + EXPIRE counter, without its races).
--
-- State: a hash {start = window start (us), count = admitted cost}.
-- Arguments: cost <= limit, limit, window_ms (burst, precision_ms unused).
-- Reply fields:
--   remaining       limit - cost admitted in the current window
--   reset_ms        ms until the current window closes: ceil((start + window - now) / 1 ms);
--                   a new window opens with the first request at or after that time
--                   (0 when nothing is counted: the whole limit is free)
--   retry_after_ms  when denied: reset_ms (sent exactly then, a request of the same
--                   cost opens a new window and is admitted; 1 ms earlier it is not)
--   delay_ms        always 0
-- Promise: the window [start, start + window) admits at most limit cost; a
-- window opens at the first request at or after the previous one's end (110
-- simultaneous requests against 100 per second: exactly 100 admitted). Across
-- a window boundary up to 2 x limit may pass in a short time: the price of
-- this algorithm (see sliding_log, sliding_window).
-- TTL: the key vanishes when its window closes: PEXPIRE reset_ms + 1 when a
-- request opens a window, which makes the key expire 1 or 2 ms after the
-- window's last millisecond (3 when Redis's clock passed a millisecond
-- between the call's TIME and its PEXPIRE). An admission in the window the
-- key holds writes only its count when PEXPIRETIME says the key expires
-- then; else (the window's length changed since, the TTL was removed, the
-- clock is NOW_US's) it sets reset_ms + 1 too. After every admission PTTL is
-- therefore reset_ms + 1, give or take 2 ms (Redis's clock).
-- Undo token "start:cost": the count of that window goes down by cost (never
-- below 0, the key deleted at 0); a newer window (another start) is left alone.
-- Exact when no other request was counted in the window since; else the
-- window keeps its start where, without the request, the next one would
-- have opened it.
do
	local A = {spec = {limit_max = MAX_COUNT}, state = 'hash'}

	function A.check(a, key, d)
		local now, cost, limit = a.now, a.cost, a.limit
		local window_us = a.window_ms * 1000
		-- A key of another type holds another algorithm's state (its rule
		-- changed algorithm): it is replaced, as if it were missing.
		local h = redis.pcall('HMGET', key, 'start', 'count')
		local replace = false
		if h.err then replace = true; h = {} end
		local start, count = tonumber(h[1]), tonumber(h[2])
		local held = h[1]	-- the key's start: its window is this one (a string)
		if start == nil or count == nil or now >= start + window_us then
			start, count, held = now, 0, nil	-- the previous window closed: this request opens one
		end
		local reset_ms = cdiv(start + window_us - now, 1000)
		local allowed, remaining, retry_ms = true, limit - count - cost, 0
		if count + cost > limit then
			allowed, remaining, retry_ms = false, math.max(0, limit - count), reset_ms
		end
		d.replace, d.start, d.count, d.held = replace, start, count, held
		return verdict(d, allowed, remaining, reset_ms, retry_ms, 0, limit - count,
		    count > 0 and reset_ms or 0)
	end

	function A.describe(a, key, d)
		if not d.held then return 'no open window' end
		return 'window start=' .. num(d.start) .. ' (' .. num(ms_ago(a.now, d.start)) ..
		    ' ms ago) count=' .. num(d.count)
	end

	function A.commit(a, key, d)
		-- The key holds this window (its start as the library writes it):
		-- the count alone changes, and the TTL its opening set still ends
		-- the window, as PEXPIRETIME shows (unless the window's length
		-- changed since). Saves a PEXPIRE and the start's HSET on most
		-- admissions.
		if d.held and string.find(d.held, '^[1-9]%d*$') then
			local last_ms = fdiv(d.start + a.window_ms * 1000 - 1, 1000)
			local at = redis.call('PEXPIRETIME', key)
			redis.call('HSET', key, 'count', num(d.count + a.cost))
			if at < last_ms + 1 or at > last_ms + 3 then
				redis.call('PEXPIRE', key, num(d.reset_ms + 1))
			end
			return
		end
		if d.replace then redis.call('DEL', key) end
		redis.call('HSET', key, 'start', num(d.start), 'count', num(d.count + a.cost))
		redis.call('PEXPIRE', key, num(d.reset_ms + 1))
	end

	function A.token(a, d)
		return num(d.start) .. ':' .. num(a.cost)
	end

	function A.undo_parse(s)
		local start, cost = string.match(s, '^(%d+):(%d+)$')
		if not start then return nil end
		return {start = start, cost = tonumber(cost)}
	end

	function A.undo(key, u, now)
		local h = redis.pcall('HMGET', key, 'start', 'count')
		if h.err or h[1] ~= u.start or (tonumber(h[2]) or 0) <= 0 then return false end
		local count = tonumber(h[2]) - u.cost
		if count <= 0 then
			redis.call('DEL', key)
		else
			redis.call('HSET', key, 'count', num(count))
		end
		return true
	end

	algorithm('fixed_window', A)
end
