-- gcra: the generic cell rate algorithm: a token bucket kept as one
-- timestamp, the theoretical arrival time (TAT) at which the bucket is full.
--
-- State: a plain string, the TAT in us: "A" or, when window/limit is not a
-- whole number of us, "A+R/D" (A + R/D us, D = limit / gcd(limit, window_us)),
-- so nothing is rounded.
-- Arguments: cost <= burst (tokens); limit: tokens added per window (emission
-- interval T = window / limit); window_ms; burst: capacity in tokens, >= 1,
-- empty: limit (precision_ms unused).
-- Reply fields:
--   remaining       whole tokens left: floor(burst - max(0, TAT - now) / T)
--   reset_ms        ms until TAT, when the bucket is full again (ceil); 0 when full
--   retry_after_ms  when denied: ms until a request of this cost fits (ceil)
--   delay_ms        always 0
-- Promise: admitted when max(TAT, now) + cost * T - now <= burst * T, then
-- TAT = max(TAT, now) + cost * T: exactly token_bucket's decisions and replies
-- with the same arguments while the clock does not run backwards, in one
-- plain key. Any interval of length d admits at most burst + d * limit / window.
-- Arithmetic is exact in ticks of 1/D us (burst * window_us / gcd(limit,
-- window_us) < 2^53, checked). redis-cell's CL.THROTTLE key max_burst count
-- period cost is limit = count, window = period * 1000, burst = max_burst + 1.
-- TTL: SET ... PX reset_ms + 1 on every admission: the key vanishes at TAT,
-- and a missing key is a full bucket.
-- Undo token "A:R:D:ticks" (the TAT the admission set, the ticks it added):
-- see undo_at in the prelude.
do
	local A = {spec = {limit_max = MAX_COUNT, burst = 'bucket'}, state = 'string'}

	function A.check(a, key, d)
		local now, cost = a.now, a.cost
		local interval, ticks_per_us = a.scale, a.rate	-- T in ticks; a tick is 1/D us
		local tau = a.burst * interval			-- capacity, in ticks
		-- Ticks from now until the stored TAT, at most tau (more only after
		-- a parameter change: tokens never go below 0). A key of another
		-- type (the rule changed algorithm) counts as missing.
		local w = ticks_ahead(key, now, ticks_per_us, tau)
		local per_ms = ticks_per_us * 1000
		local need = cost * interval
		local kept_remaining = fdiv(tau - w, interval)
		local kept_reset_ms = cdiv(w, per_ms)
		if w + need <= tau then
			w = w + need
			d.w = w
			return verdict(d, true, fdiv(tau - w, interval), cdiv(w, per_ms), 0, 0,
			    kept_remaining, kept_reset_ms)
		end
		return verdict(d, false, kept_remaining, kept_reset_ms,
		    cdiv(w + need - tau, per_ms), 0, kept_remaining, kept_reset_ms)
	end

	function A.describe(a, key, d)
		local s = redis.call('GET', key)
		if type(s) ~= 'string' or parse_at(s) == nil then return 'no bucket (full)' end
		return 'tat=' .. s .. ' (full in ' .. num(d.kept_reset_ms) .. ' ms)'
	end

	function A.commit(a, key, d)
		redis.call('SET', key, format_at(a.now, d.w, a.rate), 'PX', num(d.reset_ms + 1))
	end

	function A.token(a, d)
		return undo_at_token(a.now, d.w, a.rate, a.cost * a.scale)
	end

	A.undo_parse = undo_at_parse
	A.undo = undo_at

	algorithm('gcra', A)
end
