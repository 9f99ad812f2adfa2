-- leaky_bucket: a queue that lets requests out at a constant rate, one per
-- window/limit (scaled by cost); the gateway holds each admitted request for
-- delay_ms before answering, so a busy client waits instead of failing.
--
-- State: a plain string, the time Q (us) at which the queue is empty again:
-- "A" or, when window/limit is not a whole number of us, "A+R/D" (A + R/D us,
-- D = limit / gcd(limit, window_us)).
-- Arguments: cost >= 1: it holds the outlet for cost * T; limit: cost units let
-- out per window, T = window / limit; window_ms; burst: cost units that may
-- wait ahead of an admitted request, >= 0 (0: no queue), empty: limit
-- (precision_ms unused).
-- A request arriving at now waits w = max(0, Q - now). It is admitted when
-- w <= burst * T, leaves after delay_ms = ceil(w), and then holds the outlet
-- for cost * T: Q = now + w + cost * T. With cost 1, of n simultaneous
-- requests 1 + burst are admitted (one at once, the k-th after k * T): nginx
-- limit_req's burst, without nodelay.
-- Reply fields:
--   remaining       cost-1 requests that could still be admitted now:
--                   floor((burst * T - w') / T) + 1 with w' = Q - now, at least 0
--   reset_ms        ms until the queue is empty, Q - now (ceil); 0 when idle
--   retry_after_ms  when denied: ms until w <= burst * T (ceil)
--   delay_ms        ms the gateway holds an admitted request: ceil(w / 1 ms), 0
--                   at an idle bucket; 0 when denied
-- Promise: admitted requests leave (at now + their exact wait) in arrival
-- order, each at least (the previous one's cost) * T after the previous one,
-- none waits more than burst * T; so any interval of length d admits at most
-- burst + d * limit / window + the cost of its last request. Exact in ticks of
-- 1/D us ((burst + cost) * window_us / gcd(limit, window_us) < 2^52, checked).
-- TTL: SET ... PX reset_ms + 1 on every admission: the key vanishes when the
-- queue is empty, and a missing key is an idle bucket.
-- Undo token "A:R:D:ticks" (the Q the admission set, the ticks it added): see
-- undo_at in the prelude.
do
	local A = {spec = {limit_max = MAX_COUNT, burst = 'queue'}, state = 'string'}

	function A.check(a, key, d)
		local now, cost = a.now, a.cost
		local interval, ticks_per_us = a.scale, a.rate	-- T in ticks; a tick is 1/D us
		local max_wait = a.burst * interval		-- in ticks
		-- Ticks from now until the stored Q. A Q written with these
		-- parameters is at most (burst + its cost) * T ahead, below 2^52
		-- ticks; the cap at 2^52 only guards against a Q written with
		-- others. A key of another type (the rule changed algorithm) counts
		-- as missing.
		local w = ticks_ahead(key, now, ticks_per_us, EXACT_MAX)
		local per_ms = ticks_per_us * 1000
		local kept_remaining = w <= max_wait and math.max(0, fdiv(max_wait - w, interval) + 1) or 0
		local kept_reset_ms = cdiv(w, per_ms)
		if w <= max_wait then
			local q = w + cost * interval
			d.q = q
			return verdict(d, true, math.max(0, fdiv(max_wait - q, interval) + 1),
			    cdiv(q, per_ms), 0, kept_reset_ms, kept_remaining, kept_reset_ms)
		end
		return verdict(d, false, 0, kept_reset_ms, cdiv(w - max_wait, per_ms), 0,
		    kept_remaining, kept_reset_ms)
	end

	function A.describe(a, key, d)
		local s = redis.call('GET', key)
		if type(s) ~= 'string' or parse_at(s) == nil then return 'no queue (idle)' end
		return 'queue drains at ' .. s .. ' (in ' .. num(d.kept_reset_ms) .. ' ms)'
	end

	function A.commit(a, key, d)
		redis.call('SET', key, format_at(a.now, d.q, a.rate), 'PX', num(d.reset_ms + 1))
	end

	function A.token(a, d)
		return undo_at_token(a.now, d.q, a.rate, a.cost * a.scale)
	end

	A.undo_parse = undo_at_parse
	A.undo = undo_at

	algorithm('leaky_bucket', A)
end
