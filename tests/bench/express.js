// make bench's express peer: express with rate-limiter-flexible's
// RateLimiterRedis (ioredis), one process, serving BENCH_FILE's bytes at
// /bench/item as application/json. The limit (BENCH_LIMIT per second per
// client address) is meant never to deny: every request is counted in
// Redis and admitted. A denial is a 429, a Redis error a 500.
//   BENCH_PORT=8082 REDIS_PORT=6379 BENCH_FILE=item.json node express.js
'use strict';
const fs = require('fs');
const Redis = require('ioredis');
const express = require('express');
const { RateLimiterRedis } = require('rate-limiter-flexible');

const env = process.env;
const body = fs.readFileSync(env.BENCH_FILE);
const redis = new Redis({ host: '127.0.0.1', port: Number(env.REDIS_PORT),
	connectTimeout: 500, maxRetriesPerRequest: 1, enableOfflineQueue: false });
const limiter = new RateLimiterRedis({ storeClient: redis,
	keyPrefix: 'bench-express', points: Number(env.BENCH_LIMIT || 1e9), duration: 1 });

const app = express();
app.use((req, res, next) => {
	limiter.consume(req.ip)
		.then(() => next())
		.catch((r) => res.status(r instanceof Error ? 500 : 429).end());
});
app.get('/bench/item', (req, res) => {
	res.type('application/json').send(body);
});
const server = app.listen(Number(env.BENCH_PORT), '127.0.0.1');
process.on('SIGTERM', () => server.close(() => { redis.quit(); }));
