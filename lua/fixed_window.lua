-- fixed_window: a counter per window that opens at the first request after
-- the previous window closed (the INCR + EXPIRE counter, without its races).
--
-- State: a hash {start = window start (us), count = admitted cost, w = the
-- window's length (ms) that the key's TTL ends, "0" when not known}. An
-- older version's state has no w; it reads start and count only (w is
-- left alone by it, see TTL).
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
-- key holds writes only its count when w, written beside the TTL, says the
-- TTL ends this window: w is the rule's window_ms and the clock is Redis
-- TIME. Wherever w is, it is true: a write that sets the TTL also writes w
-- where the key holds one that would change (window_ms with Redis's clock,
-- "0" with NOW_US's, whose TTL does not end the window in Redis's clock). A
-- window opened on a key without w writes none (a window of one admission
-- costs what it did before w). An admission in a held window without w (a
-- window's second; an older version's state), with another w (the window's
-- length changed since) or with NOW_US reads PEXPIRETIME, sets PEXPIRE
-- reset_ms + 1 where the TTL does not end the window, and writes w with the
-- count: from a window's third admission on, each is one HSET. After every
-- admission PTTL is therefore reset_ms + 1,
-- give or take 2 ms (Redis's clock), unless someone removed the TTL
-- (PERSIST) since w was written: then the key keeps none until a request
-- opens the next window. Gateways that share a key share its window length
-- (an older version leaves w as it was when it sets the TTL).
-- Undo token "start:cost": the count of that window goes down by cost (never
-- below 0, the key deleted at 0); a newer window (another start) is left alone.
-- Exact when no other request was counted in the window since; else the
-- window keeps its start where, without the request, the next one would
-- have opened it.
do
	local A = {spec = {limit_max = 1e9}, state = 'hash'}

	function A.check(a, key, d)
		local now, cost, limit = a.now, a.cost, a.limit
		local window_us = a.window_ms * 1000
		-- A key of another type holds another algorithm's state (its rule
		-- changed algorithm): it is replaced, as if it were missing.
		local h = redis.pcall('HMGET', key, 'start', 'count', 'w')
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
		d.replace, d.start, d.count, d.held, d.w = replace, start, count, held, h[3]
		return verdict(d, allowed, remaining, reset_ms, retry_ms, 0, limit - count,
		    count > 0 and reset_ms or 0)
	end

	function A.describe(a, key, d)
		if not d.held then return 'no open window' end
		return 'window start=' .. num(d.start) .. ' (' .. num(ms_ago(a.now, d.start)) ..
		    ' ms ago) count=' .. num(d.count)
	end

	function A.commit(a, key, d)
		local count = num(d.count + a.cost)
		-- The key holds this window (its start as the library writes it):
		-- the count alone changes. The TTL its opening set still ends the
		-- window when w says so (see TTL above); else PEXPIRETIME tells.
		if d.held and string.find(d.held, '^[1-9]%d*$') then
			if now_is_time and tonumber(d.w) == a.window_ms then
				redis.call('HSET', key, 'count', count)
				return
			end
			local last_ms = fdiv(d.start + a.window_ms * 1000 - 1, 1000)
			local at = redis.call('PEXPIRETIME', key)
			redis.call('HSET', key, 'count', count, 'w', now_is_time and num(a.window_ms) or '0')
			if at < last_ms + 1 or at > last_ms + 3 then
				redis.call('PEXPIRE', key, num(d.reset_ms + 1))
			end
			return
		end
		if d.replace then redis.call('DEL', key) end
		-- A window opens, and the TTL set now ends it. A w the key holds
		-- must say so too; a key without one gets it at its next admission
		-- (above): a window of one admission costs what it did before w.
		local w = now_is_time and a.window_ms or 0
		if d.w and tonumber(d.w) ~= w then
			redis.call('HSET', key, 'start', num(d.start), 'count', count, 'w', num(w))
		else
			redis.call('HSET', key, 'start', num(d.start), 'count', count)
		end
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
